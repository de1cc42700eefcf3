import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import type { ENIPool, ENIPoolStatus, ReleaseAck } from '../../src/api/types.js';
import { agentStatus, allocate, emptyState, release, type AgentState } from '../../src/agent/allocator.js';
import { planRelease, showsConfirmedRelease, type Ack } from '../../src/ipam/release.js';

/**
 * A model of the release handshake between the operator and one node agent, over the pool's
 * status as the API server stores it (every version kept, so each side can act on a stale
 * cache). It runs the real pure functions of both sides (planRelease; allocate, release,
 * agentStatus) and the operator shell's three safeguards: acks matched to their request,
 * status writes that carry the resourceVersion they were planned from, and planning on a fresh
 * read of the pool whenever the cache shows an address confirmed free (so before any unassign). Invariant: nothing unassigned is held by a pod or cooling down.
 */

const ENI = { id: 'eni-a', primaryIp: '10.0.0.1', secondaryIps: ['10.0.0.2', '10.0.0.3', '10.0.0.4', '10.0.0.5'] };
const COOLDOWN_MS = 30_000;

type Step =
  | { k: 'alloc'; c: number }
  | { k: 'free'; c: number }
  | { k: 'agentRefresh' }
  | { k: 'agentWrite' }
  | { k: 'opRefresh'; lag: number }
  | { k: 'op'; excess: number }
  | { k: 'tick'; ms: number };

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ k: fc.constant('alloc' as const), c: fc.nat(3) }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('free' as const), c: fc.nat(3) }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant('agentRefresh' as const) }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant('agentWrite' as const) }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant('opRefresh' as const), lag: fc.nat(2) }) },
  { weight: 4, arbitrary: fc.record({ k: fc.constant('op' as const), excess: fc.nat(3) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('tick' as const), ms: fc.constantFrom(0, 1, 1000, 40_000) }) },
);

interface Safeguards {
  /** Acks are matched to the request they name (off: any ack counts, as before the fix). */
  matchAcks: boolean;
  /** Status writes carry the resourceVersion they were planned from. */
  precondition: boolean;
  /** A pool whose cache shows a confirmed release is read afresh and planned on as it is now. */
  liveRead: boolean;
}

type Status = Pick<ENIPoolStatus, 'enis' | 'releaseRequests' | 'releaseAcks' | 'used' | 'cooling'>;

function run(steps: Step[], s: Safeguards): void {
  let now = 1_000_000;
  let stamp = 0;
  const cloud = { ...ENI, secondaryIps: [...ENI.secondaryIps] };
  const published = () => [
    {
      id: ENI.id,
      mac: 'm',
      state: 'InUse' as const,
      vSwitchCIDR: '10.0.0.0/24',
      gatewayIP: '10.0.0.253',
      ips: [cloud.primaryIp, ...cloud.secondaryIps],
    },
  ];
  const history: Status[] = [{ enis: published(), releaseRequests: {}, releaseAcks: {}, used: {}, cooling: {} }];
  const latest = () => history.length - 1;
  const write = (from: number, patch: Partial<Status>): boolean => {
    if (s.precondition && from !== latest()) return false; // 409 Conflict
    history.push({ ...history[latest()]!, ...patch });
    return true;
  };
  const poolAt = (v: number): ENIPool => ({
    apiVersion: 'eniipam.io/v1alpha1',
    kind: 'ENIPool',
    metadata: { name: 'n' },
    spec: { nodeName: 'n' },
    status: history[v],
  });
  let agent: AgentState = emptyState();
  let agentView = 0;
  let opView = 0;

  const plan = (v: number, excess: number) => {
    const st = history[v]!;
    const requests = new Map(Object.entries(st.releaseRequests ?? {}));
    const acks = new Map<string, Ack>(
      Object.entries(st.releaseAcks ?? {}).map(([ip, a]: [string, ReleaseAck]) => [
        ip,
        s.matchAcks ? a : { ...a, requestedAt: requests.get(ip) ?? a.requestedAt },
      ]),
    );
    const cooling = new Set(
      Object.entries(st.cooling ?? {})
        .filter(([, t]) => Date.parse(t) > now)
        .map(([ip]) => ip),
    );
    const used = new Set(Object.keys(st.used ?? {}));
    return planRelease({
      enis: [cloud],
      used,
      cooling,
      excess,
      excessSince: 0,
      now,
      delayMs: 0,
      requests,
      acks,
      deleteEmptyEnis: false,
    });
  };

  for (const step of steps) {
    switch (step.k) {
      case 'alloc': {
        const r = allocate(
          agent,
          poolAt(agentView),
          { containerId: `c${step.c}`, ifName: 'eth0', pod: `ns/p${step.c}` },
          now,
        );
        agent = r.state;
        break;
      }
      case 'free':
        agent = release(agent, `c${step.c}`, undefined, now, COOLDOWN_MS).state;
        break;
      case 'agentRefresh':
        agentView = latest();
        break;
      case 'agentWrite': {
        const mine = agentStatus(agent, poolAt(agentView), now);
        write(latest(), mine); // merge patches of its own fields, without a precondition, as the agent writes
        break;
      }
      case 'opRefresh':
        opView = Math.max(opView, latest() - step.lag);
        break;
      case 'tick':
        now += step.ms;
        break;
      case 'op': {
        // As the shell does: a cache that shows a confirmed release is not planned on; the pool
        // is read afresh (the latest version) and planned on, and the write carries that version.
        const from = s.liveRead && showsConfirmedRelease(history[opView]) ? latest() : opView;
        const p = plan(from, step.excess);
        const unassign = p.unassign.flatMap((u) => u.ips);
        for (const ip of unassign) {
          const holder = Object.values(agent.allocations).find((a) => a.ip === ip);
          if (holder) throw new Error(`unassigned ${ip}, which pod ${holder.pod} holds`);
          if ((agent.cooling[ip] ?? 0) > now) throw new Error(`unassigned ${ip} while it cools down`);
          cloud.secondaryIps = cloud.secondaryIps.filter((x) => x !== ip);
        }
        const requests = { ...history[from]!.releaseRequests };
        for (const ip of [...p.withdraw, ...unassign]) delete requests[ip];
        for (const ip of p.request) requests[ip] = new Date(now + ++stamp).toISOString();
        // The cache learns of this write only later (opRefresh), as an informer does.
        write(from, { releaseRequests: requests, enis: published() });
        break;
      }
    }
  }
}

const SAFE: Safeguards = { matchAcks: true, precondition: true, liveRead: true };
const steps = fc.array(stepArb, { maxLength: 60 });

describe('release handshake model (operator + agent, interleavings by fast-check)', () => {
  it('never unassigns an IP a pod holds or one cooling down, whatever the interleaving and cache lag', () => {
    fc.assert(
      fc.property(steps, (s) => run(s, SAFE)),
      { numRuns: 5000, seed: 20261130 },
    );
  });

  it('replays the sequence of the defect report: withdrawn, handed to a pod, requested again', () => {
    const seq: Step[] = [
      { k: 'agentRefresh' },
      { k: 'opRefresh', lag: 0 },
      { k: 'op', excess: 1 }, // request 10.0.0.2
      { k: 'agentRefresh' },
      { k: 'opRefresh', lag: 0 },
      { k: 'op', excess: 0 }, // a pod is pending: withdraw, before any answer came
      { k: 'agentWrite' }, // the agent answers the request it saw: ready
      { k: 'agentRefresh' },
      { k: 'alloc', c: 0 }, // 10.0.0.1
      { k: 'alloc', c: 1 }, // 10.0.0.2, free again, goes to a pod
      { k: 'tick', ms: 1 },
      { k: 'opRefresh', lag: 0 },
      { k: 'op', excess: 1 }, // excess again: 10.0.0.2 is requested again, next to the old ready
      { k: 'opRefresh', lag: 0 },
      { k: 'op', excess: 1 },
    ];
    expect(() => run(seq, { ...SAFE, matchAcks: false })).toThrow(/unassigned 10.0.0.2, which pod ns\/p1 holds/);
    expect(() => run(seq, SAFE)).not.toThrow();
  });

  it('replays a release planned on a cache older than the operator\u2019s own withdrawal', () => {
    const seq: Step[] = [
      { k: 'agentRefresh' },
      { k: 'opRefresh', lag: 0 },
      { k: 'op', excess: 1 }, // request 10.0.0.2
      { k: 'agentRefresh' },
      { k: 'agentWrite' }, // ready, for that request
      { k: 'op', excess: 0 }, // planned on a cache without the answer: withdraw
      { k: 'agentRefresh' },
      { k: 'alloc', c: 0 },
      { k: 'alloc', c: 1 }, // 10.0.0.2 goes to a pod
      { k: 'opRefresh', lag: 1 }, // a cache that still shows the request and its ready
      { k: 'op', excess: 1 },
    ];
    expect(() => run(seq, { matchAcks: true, precondition: false, liveRead: false })).toThrow(
      /unassigned 10.0.0.2, which pod ns\/p1 holds/,
    );
    expect(() => run(seq, { matchAcks: true, precondition: true, liveRead: false })).not.toThrow();
    expect(() => run(seq, { matchAcks: true, precondition: false, liveRead: true })).not.toThrow();
  });
});
