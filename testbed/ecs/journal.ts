import type { Eni, World } from './world.js';

/** One call as the emulator answered it. */
export interface CallRecord {
  /** Order of arrival at the answer, from 1. */
  seq: number;
  /** Wall-clock milliseconds when it was answered (or, for a call that never answers, held). */
  at: number;
  /** The caller's AccessKeyId as sent (also for calls that failed authentication); absent when none was sent. */
  accessKeyId?: string;
  action: string;
  /** `OK`, the error code, or for injected faults the kind's name in PascalCase (`Timeout`, `MissingField`…). */
  code: string;
  clientToken?: string;
  /** For calls that name or create an ENI. */
  eniId?: string;
  instanceId?: string;
  /** Addresses the call added to or removed from the ENI (all of them for a delete). */
  ips?: string[];
}

interface Before {
  eniId?: string;
  instanceId?: string;
  ips: string[];
}

/** What a mutating call was about: the ENI before it ran, and its answer. */
export interface Touched {
  before: Before;
  world: World;
  action: string;
  response?: object;
  /** Addresses the call named (an unassign's), recorded even when the call changed nothing. */
  requested: string[];
}

export type CallRecordQuery = { since?: number; action?: string; accessKeyId?: string };

const addresses = (e: Eni | undefined): string[] =>
  e ? [e.primaryIp, ...e.secondaryIps, ...e.ipv4Prefixes, ...e.ipv6Prefixes] : [];

/**
 * The emulator's record of every call, for fault suites that check what was done and when:
 * each unassign or delete against what pods held at that moment, the calls one caller made
 * after a time. Keeps the last `limit` calls.
 */
export class CallJournal {
  private readonly records: CallRecord[] = [];
  private seq = 0;

  constructor(private readonly limit = 1_000_000) {}

  /** Notes the ENI a call is about before it runs, so that what it changed can be recorded after. */
  before(world: World, eniId: string | undefined, instanceId: string | undefined): Before {
    const eni = eniId ? world.enis.get(eniId) : undefined;
    return { eniId, instanceId: instanceId ?? eni?.instanceId, ips: addresses(eni) };
  }

  record(r: Omit<CallRecord, 'seq' | 'at'>, touched?: Touched): void {
    const rec: CallRecord = { seq: ++this.seq, at: Date.now(), ...r };
    if (touched) {
      const { before, world, action, response } = touched;
      const eniId = before.eniId ?? (response as { NetworkInterfaceId?: string } | undefined)?.NetworkInterfaceId;
      const eni = eniId ? world.enis.get(eniId) : undefined;
      const after = addresses(eni);
      let ips: string[];
      if (action === 'DeleteNetworkInterface') ips = before.ips;
      else {
        const was = new Set(before.ips);
        const now = new Set(after);
        ips = [...before.ips.filter((ip) => !now.has(ip)), ...after.filter((ip) => !was.has(ip))];
        // An unassign that failed or whose effect is delayed still names what it asked for.
        for (const ip of touched.requested) if (!ips.includes(ip)) ips.push(ip);
      }
      Object.assign(rec, { eniId, instanceId: before.instanceId ?? eni?.instanceId, ips });
    }
    this.records.push(rec);
    if (this.records.length > this.limit) this.records.splice(0, this.records.length - this.limit);
  }

  list(q: CallRecordQuery = {}): CallRecord[] {
    return this.records.filter(
      (r) =>
        (q.since === undefined || r.at >= q.since) &&
        (q.action === undefined || r.action === q.action) &&
        (q.accessKeyId === undefined || r.accessKeyId === q.accessKeyId),
    );
  }
}
