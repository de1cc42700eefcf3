import { appendFileSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import type { ENIPool } from '../../src/api/types.js';
import {
  agentStatus,
  allocate,
  departedRecoveries,
  emptyState,
  freeAddresses,
  NETWORK_STATUS_ANNOTATION,
  podInterfaces,
  recoverAllocations,
  release,
  strayAllocations,
  type AgentState,
} from '../../src/agent/allocator.js';
import { StateFile, StateFileError, writeFully } from '../../src/agent/state-file.js';

function pool(ips: string[], opts: { attaching?: string[]; requested?: string[] } = {}): ENIPool {
  return {
    apiVersion: 'eniipam.io/v1alpha1',
    kind: 'ENIPool',
    metadata: { name: 'n1' },
    spec: { nodeName: 'n1' },
    status: {
      enis: [
        {
          id: 'eni-a',
          mac: '00:16:3e:00:00:01',
          state: 'InUse',
          vSwitchCIDR: '192.168.16.0/20',
          gatewayIP: '192.168.31.253',
          ips,
        },
        {
          id: 'eni-b',
          mac: '00:16:3e:00:00:02',
          state: 'Attaching',
          vSwitchCIDR: '192.168.16.0/20',
          gatewayIP: '192.168.31.253',
          ips: opts.attaching ?? [],
        },
      ],
      releaseRequests: Object.fromEntries((opts.requested ?? []).map((ip) => [ip, '2026-01-01T00:00:00Z'])),
    },
  };
}

const IPS = Array.from({ length: 8 }, (_, i) => `192.168.16.${i + 1}`);

describe('agent allocation', () => {
  it('hands out addresses of InUse ENIs with prefix, gateway and MAC, the same again for the same container', () => {
    const p = pool(IPS.slice(0, 2), { attaching: ['192.168.16.99'] });
    const a = allocate(emptyState(), p, { containerId: 'c1', ifName: 'eth0', pod: 'default/web' }, 0);
    if ('error' in a) throw new Error('no lease');
    expect(a.lease).toEqual({
      ip: '192.168.16.1',
      prefixLength: 20,
      gateway: '192.168.31.253',
      eniId: 'eni-a',
      mac: '00:16:3e:00:00:01',
      vSwitchCidr: '192.168.16.0/20',
    });
    const again = allocate(a.state, p, { containerId: 'c1', ifName: 'eth0', pod: 'default/web' }, 1);
    expect(again).toMatchObject({ lease: { ip: '192.168.16.1' }, fresh: false });
    const b = allocate(a.state, p, { containerId: 'c2', ifName: 'eth0', pod: 'default/api' }, 1);
    if ('error' in b) throw new Error('no lease');
    expect(b.lease.ip).toBe('192.168.16.2');
    expect(allocate(b.state, p, { containerId: 'c3', ifName: 'eth0', pod: 'default/x' }, 1)).toMatchObject({
      error: 'pool-empty',
    });
  });

  it('cools a released address down before reuse, and releases idempotently', () => {
    const p = pool(IPS.slice(0, 1));
    const a = allocate(emptyState(), p, { containerId: 'c1', ifName: 'eth0', pod: 'd/a' }, 0);
    if ('error' in a) throw new Error('no lease');
    const r = release(a.state, 'c1', 'eth0', 100, 30_000);
    expect(r.released).toEqual(['192.168.16.1']);
    expect(release(r.state, 'c1', 'eth0', 101, 30_000).released).toEqual([]);
    expect(freeAddresses(r.state, p, 29_000)).toEqual([]);
    expect(freeAddresses(r.state, p, 30_100)).toEqual(['192.168.16.1']);
  });

  it('answers release requests: ready for a free address (out of the free list), do-not-release for one in use', () => {
    const p = pool(IPS.slice(0, 3), { requested: ['192.168.16.1', '192.168.16.3'] });
    const a = allocate(emptyState(), pool(IPS.slice(0, 3)), { containerId: 'c1', ifName: 'eth0', pod: 'd/a' }, 0);
    if ('error' in a) throw new Error('no lease');
    expect(freeAddresses(a.state, p, 0)).toEqual(['192.168.16.2']);
    expect(agentStatus(a.state, p, 0)).toEqual({
      used: { '192.168.16.1': { pod: 'd/a', containerID: 'c1', ifName: 'eth0' } },
      releaseAcks: {
        '192.168.16.1': { answer: 'do-not-release', requestedAt: '2026-01-01T00:00:00Z' },
        '192.168.16.3': { answer: 'ready', requestedAt: '2026-01-01T00:00:00Z' },
      },
      cooling: {},
    });
  });

  it('acks do-not-release for an address that is not on an InUse ENI of its own pool', () => {
    // Two pools naming one instance: the operator of the other asks this agent for addresses it
    // never had, or for one of an ENI that is not attached here.
    const p = pool(IPS.slice(0, 2), {
      attaching: ['192.168.16.99'],
      requested: ['192.168.16.2', '192.168.16.99', '10.8.0.5'],
    });
    expect(agentStatus(emptyState(), p, 0).releaseAcks).toEqual({
      '192.168.16.2': { answer: 'ready', requestedAt: '2026-01-01T00:00:00Z' },
      '192.168.16.99': { answer: 'do-not-release', requestedAt: '2026-01-01T00:00:00Z' },
      '10.8.0.5': { answer: 'do-not-release', requestedAt: '2026-01-01T00:00:00Z' },
    });
  });

  it('in an Exclusive pool, hands out no address a Shared spell left on an ENI, and answers its release (the drain)', () => {
    // eni-a holds secondaries from the Shared spell; one is still a pod's (its allocation kept).
    const shared = pool(IPS.slice(0, 3));
    const a = allocate(emptyState(), shared, { containerId: 'c1', ifName: 'eth0', pod: 'd/a' }, 0);
    if ('error' in a) throw new Error('no lease');
    const p = pool(IPS.slice(0, 3), { requested: ['192.168.16.1', '192.168.16.2'] });
    p.spec.eniMode = 'Exclusive';
    expect(freeAddresses(a.state, p, 0)).toEqual([]);
    expect(agentStatus(a.state, p, 0).releaseAcks).toEqual({
      '192.168.16.1': { answer: 'do-not-release', requestedAt: '2026-01-01T00:00:00Z' },
      '192.168.16.2': { answer: 'ready', requestedAt: '2026-01-01T00:00:00Z' },
    });
  });

  it('in an Exclusive pool, a Shared spell’s pod on a leftover address is no stray, and is taken back with its ENI; an ENI holding IPv6 is no pod’s whole', () => {
    const shared = pool(IPS.slice(0, 3));
    const a = allocate(emptyState(), shared, { containerId: 'c1', ifName: 'eth0', pod: 'd/a' }, 0);
    if ('error' in a) throw new Error('no lease');
    const p = pool(IPS.slice(0, 3));
    p.spec.eniMode = 'Exclusive';
    expect(strayAllocations(a.state, p)).toEqual([]);
    p.status!.used = { '192.168.16.1': { pod: 'd/a', containerID: 'c1', ifName: 'eth0' } };
    expect(recoverAllocations(emptyState(), p, [], 0).recovered.map((x) => [x.ip, x.eniId])).toEqual([
      ['192.168.16.1', 'eni-a'],
    ]);
    // eni-a with only IPv6 left (a pod holds one): neither handed out whole nor released whole.
    const v6 = pool([], { requested: ['eni-a'] });
    v6.spec.eniMode = 'Exclusive';
    Object.assign(v6.status!.enis![0]!, { primaryIP: '192.168.16.200', deviceIndex: 1, ipv6s: ['2408:4000::5'] });
    expect(freeAddresses(emptyState(), v6, 0)).toEqual([]);
    expect(agentStatus(emptyState(), v6, 0).releaseAcks['eni-a']).toMatchObject({ answer: 'do-not-release' });
  });

  it('never gives up an address the node itself uses (configured on one of its devices, as eth0 may be)', () => {
    const p = pool(IPS.slice(0, 2), { requested: ['192.168.16.2', '192.168.16.3'] });
    expect(agentStatus(emptyState(), p, 0, new Set(['192.168.16.3'])).releaseAcks).toEqual({
      '192.168.16.2': { answer: 'ready', requestedAt: '2026-01-01T00:00:00Z' },
      '192.168.16.3': { answer: 'do-not-release', requestedAt: '2026-01-01T00:00:00Z' },
    });
  });

  it('answers a request for an IP still cooling down only once its cool-down has ended', () => {
    const a = allocate(emptyState(), pool(IPS.slice(0, 2)), { containerId: 'c1', ifName: 'eth0', pod: 'd/a' }, 0);
    if ('error' in a) throw new Error('no lease');
    const r = release(a.state, 'c1', 'eth0', 1000, 30_000);
    const p = pool(IPS.slice(0, 2), { requested: ['192.168.16.1', '192.168.16.2'] });
    expect(agentStatus(r.state, p, 2000).releaseAcks).toEqual({
      '192.168.16.2': { answer: 'ready', requestedAt: '2026-01-01T00:00:00Z' },
    });
    expect(agentStatus(r.state, p, 31_000).releaseAcks).toEqual({
      '192.168.16.1': { answer: 'ready', requestedAt: '2026-01-01T00:00:00Z' },
      '192.168.16.2': { answer: 'ready', requestedAt: '2026-01-01T00:00:00Z' },
    });
  });

  it('reports cooling addresses with the end of their cool-down, until it has passed', () => {
    const p = pool(IPS.slice(0, 2));
    const a = allocate(emptyState(), p, { containerId: 'c1', ifName: 'eth0', pod: 'd/a' }, 0);
    if ('error' in a) throw new Error('no lease');
    const r = release(a.state, 'c1', 'eth0', 1000, 30_000);
    expect(agentStatus(r.state, p, 2000).cooling).toEqual({ '192.168.16.1': new Date(31_000).toISOString() });
    expect(agentStatus(r.state, p, 31_000).cooling).toEqual({});
  });

  it('flags allocations whose address left the pool', () => {
    const a = allocate(emptyState(), pool(IPS.slice(0, 2)), { containerId: 'c1', ifName: 'eth0', pod: 'd/a' }, 0);
    if ('error' in a) throw new Error('no lease');
    expect(strayAllocations(a.state, pool(['192.168.16.2'])).map((x) => x.ip)).toEqual(['192.168.16.1']);
  });

  it('takes an address of an ENI whose datapath is ready first, one of another ENI only when none is free (property)', () => {
    const twoEnis = (a: string[], b: string[]): ENIPool => {
      const p = pool(a);
      const second = { ...p.status!.enis![0]!, id: 'eni-c', mac: '00:16:3e:00:00:03', ips: b };
      return { ...p, status: { ...p.status!, enis: [p.status!.enis![0]!, second] } };
    };
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 4 }),
        fc.integer({ min: 0, max: 4 }),
        fc.constantFrom('eni-a', 'eni-c'),
        fc.integer({ min: 1, max: 10 }),
        (onA, onC, ready, pods) => {
          const p = twoEnis(IPS.slice(0, onA), IPS.slice(4, 4 + onC));
          const readyIps = (ready === 'eni-a' ? IPS.slice(0, onA) : IPS.slice(4, 4 + onC)).length;
          let state = emptyState();
          for (let k = 0; k < pods; k++) {
            const r = allocate(
              state,
              p,
              { containerId: `c${k}`, ifName: 'eth0', pod: `d/p${k}` },
              0,
              undefined,
              new Set([ready]),
            );
            if (k >= onA + onC) {
              expect(r).toMatchObject({ error: 'pool-empty' });
              continue;
            }
            if (!('lease' in r)) throw new Error(`no lease for pod ${k} of ${onA + onC} addresses`);
            // The first pods land on the ready ENI, as long as it has a free address; then the other.
            expect(r.lease.eniId === ready).toBe(k < readyIps);
            state = r.state;
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it('never gives one address to two interfaces, nor a requested or cooling one (property)', () => {
    type Op = { kind: 'add' | 'del'; c: number; at: number };
    fc.assert(
      fc.property(
        fc.array(fc.record({ kind: fc.constantFrom('add' as const, 'del' as const), c: fc.nat(12), at: fc.nat(100) }), {
          maxLength: 80,
        }),
        fc.subarray(IPS),
        (ops: Op[], requested) => {
          const p = pool(IPS, { requested });
          let state: AgentState = emptyState();
          let now = 0;
          const cooledUntil = new Map<string, number>();
          for (const op of ops) {
            now += op.at;
            if (op.kind === 'add') {
              const r = allocate(state, p, { containerId: `c${op.c}`, ifName: 'eth0', pod: `d/p${op.c}` }, now);
              state = r.state;
              if ('lease' in r && r.fresh) {
                expect(requested).not.toContain(r.lease.ip);
                expect((cooledUntil.get(r.lease.ip) ?? 0) <= now).toBe(true);
              }
            } else {
              const r = release(state, `c${op.c}`, 'eth0', now, 50);
              state = r.state;
              r.released.forEach((ip) => cooledUntil.set(ip, now + 50));
            }
            const ips = Object.values(state.allocations).map((a) => a.ip);
            expect(new Set(ips).size).toBe(ips.length);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('agent state file', () => {
  it('writes a change whole even when the disk takes it in pieces, and says so when it takes no more', () => {
    const got: Buffer[] = [];
    const piecemeal = ((_fd: number, data: Buffer, offset: number, length: number) => {
      const n = Math.min(3, length);
      got.push(data.subarray(offset, offset + n));
      return n;
    }) as unknown as typeof import('node:fs').writeSync;
    writeFully(1, Buffer.from('{"allocations":{}}\n'), 'x', piecemeal);
    expect(Buffer.concat(got).toString()).toBe('{"allocations":{}}\n');
    const full = (() => 0) as unknown as typeof import('node:fs').writeSync;
    expect(() => writeFully(1, Buffer.from('abc'), '/var/lib/eni-ipam/allocations.journal', full)).toThrow(
      'the agent state /var/lib/eni-ipam/allocations.journal took 0 of 3 bytes and no more; is the disk full?',
    );
  });

  it('survives a round trip and refuses a damaged file with a clear error', () => {
    const dir = mkdtempSync(join(tmpdir(), 'agent-'));
    const f = StateFile.in(join(dir, 'state'));
    expect(f.load()).toEqual(emptyState());
    const a = allocate(emptyState(), pool(IPS), { containerId: 'c1', ifName: 'eth0', pod: 'd/a' }, 0);
    f.save(a.state);
    expect(f.load()).toEqual(a.state);
    f.close();
    writeFileSync(f.path, '{"allocations": {');
    rmSync(f.journalPath);
    expect(() => f.load()).toThrow(StateFileError);
    expect(() => f.load()).toThrow(/is not valid JSON/);
  });

  it('journals each change, drops a write a crash cut short, and folds the journal into a snapshot', () => {
    const dir = mkdtempSync(join(tmpdir(), 'agent-'));
    const f = StateFile.in(dir);
    let state = emptyState();
    const states: Array<typeof state> = [];
    for (let i = 0; i < 3; i++) {
      const r = allocate(state, pool(IPS), { containerId: `c${i}`, ifName: 'eth0', pod: `d/p${i}` }, 0);
      if ('error' in r) throw new Error('no lease');
      state = r.state;
      f.save(state);
      states.push(state);
    }
    expect(StateFile.in(dir).load()).toEqual(states[2]);
    // A crash in the middle of the next write: half a line, no newline.
    f.close();
    appendFileSync(f.journalPath, '{"allocations":{"192.168');
    expect(StateFile.in(dir).load()).toEqual(states[2]);
    // The next writer cuts the torn write away before appending.
    const g = StateFile.in(dir);
    const r = release(states[2]!, 'c0', 'eth0', 10, 30_000);
    g.save(r.state);
    expect(StateFile.in(dir).load()).toEqual(r.state);
    // A damaged complete line is not a crash: it is reported.
    g.close();
    writeFileSync(g.journalPath, `not json\n${JSON.stringify(r.state)}\n`);
    expect(() => StateFile.in(dir).load()).toThrow(/allocations.journal is not valid JSON/);
    rmSync(g.journalPath);
    // Many changes: the journal is folded into the snapshot and stays small.
    const h = StateFile.in(dir);
    for (let i = 0; i < 1200; i++)
      h.save({ ...r.state, cooling: { ...r.state.cooling, [`10.0.${i >> 8}.${i & 255}`]: i } });
    h.close();
    const lastLine = JSON.stringify({ ...r.state, cooling: { ...r.state.cooling, '10.0.4.175': 1199 } }).length + 1;
    expect(statSync(h.journalPath).size).toBeLessThanOrEqual(Math.max(256 * 1024, 17 * lastLine));
    expect(JSON.parse(readFileSync(h.path, 'utf8')).cooling).toBeDefined();
    expect(StateFile.in(dir).load().cooling['10.0.4.175']).toBe(1199);
    // A large state (100 KiB a line) is not folded every few saves (three fsyncs each time): the journal keeps 16 lines.
    const big = StateFile.in(mkdtempSync(join(tmpdir(), 'state-big-')));
    const large = {
      ...r.state,
      cooling: Object.fromEntries(Array.from({ length: 4000 }, (_, i) => [`10.1.${i >> 8}.${i & 255}`, i])),
    };
    for (let i = 0; i < 10; i++) big.save({ ...large, cooling: { ...large.cooling, last: i } });
    big.close();
    expect(readFileSync(big.journalPath, 'utf8').split('\n').filter(Boolean)).toHaveLength(10);
    expect(StateFile.in(join(big.path, '..')).load().cooling.last).toBe(9);
  });

  it('saves off the event loop the same way: journal lines, folded into the snapshot now and then', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'state-async-'));
    const f = StateFile.in(dir);
    const base = {
      allocations: {},
      cooling: Object.fromEntries(Array.from({ length: 500 }, (_, i) => [`10.2.${i >> 8}.${i & 255}`, i])),
    };
    for (let i = 0; i < 100; i++) await f.saveAsync({ ...base, cooling: { ...base.cooling, last: i } });
    f.close();
    // Folded once past 256 KiB: the journal holds at most that many lines, the snapshot the rest.
    const lineBytes = JSON.stringify({ ...base, cooling: { ...base.cooling, last: 99 } }).length + 1;
    expect(readFileSync(f.journalPath, 'utf8').split('\n').filter(Boolean).length).toBeLessThanOrEqual(
      Math.ceil((256 * 1024) / lineBytes),
    );
    expect(JSON.parse(readFileSync(f.path, 'utf8')).cooling.last).toBeGreaterThan(70);
    expect(StateFile.in(dir).load().cooling.last).toBe(99);
  });

  it('does not take back an address the state saw released and still cools: the old status.used and a terminating pod say otherwise', () => {
    // The DEL was saved (the address cools down), then the agent died before its next status write.
    const p = pool(IPS.slice(0, 2));
    p.status!.used = { '192.168.16.1': { pod: 'd/a', containerID: 'c1', ifName: 'eth0' } };
    const a = allocate(emptyState(), p, { containerId: 'c1', ifName: 'eth0', pod: 'd/a' }, 0);
    if ('error' in a) throw new Error('no lease');
    const released = release(a.state, 'c1', 'eth0', 100, 30_000).state;
    const pods = [{ pod: 'd/a', podIP: '192.168.16.1' }];
    expect(recoverAllocations(released, p, pods, 1000).recovered).toEqual([]);
    // Once it has cooled down, nothing in the state speaks for it: the pod's word is kept again.
    expect(recoverAllocations(released, p, pods, 40_000).recovered.map((x) => x.ip)).toEqual(['192.168.16.1']);
  });

  it('takes back in what a lost state file held: status.used and the pods of the node, until their pods are gone', () => {
    const p = pool(IPS.slice(0, 4));
    p.status!.used = { '192.168.16.1': { pod: 'd/a', containerID: 'c1' } };
    const r = recoverAllocations(
      emptyState(),
      p,
      [
        { pod: 'd/b', podIP: '192.168.16.2' },
        { pod: 'd/elsewhere', podIP: '10.9.9.9' },
      ],
      5,
    );
    // d/a's entry names no interface and d/a is not in the pod list: nothing tells its interface.
    expect(r.recovered.map((a) => [a.ip, a.pod, a.containerId, a.ifName])).toEqual([
      ['192.168.16.1', 'd/a', 'c1', '*'],
      ['192.168.16.2', 'd/b', 'pod:d/b', '*'],
    ]);
    expect(freeAddresses(r.state, p, 5)).toEqual(['192.168.16.3', '192.168.16.4']);
    expect(recoverAllocations(r.state, p, [{ pod: 'd/b', podIP: '192.168.16.2' }], 6).recovered).toEqual([]);
    // An address whose interface is unknown may be any interface's: a DEL of one interface leaves
    // it; a release of the whole container frees it.
    expect(release(r.state, 'c1', 'eth0', 10, 1000).released).toEqual([]);
    expect(release(r.state, 'c1', undefined, 10, 1000).released).toEqual(['192.168.16.1']);
    expect(departedRecoveries(r.state, [{ pod: 'd/a' }]).map((a) => a.ip)).toEqual(['192.168.16.2']);
  });

  it('recovers every address of one container, pod addresses whatever their ENI, cool-downs still running, and no host address', () => {
    const p = pool(IPS.slice(0, 4));
    p.status!.used = {
      '192.168.16.1': { pod: 'd/a', containerID: 'c1' },
      '192.168.16.2': { pod: 'd/a', containerID: 'c1' },
    };
    p.status!.cooling = {
      '192.168.16.3': new Date(60_000).toISOString(),
      '192.168.16.4': new Date(1000).toISOString(),
    };
    // 192.168.20.9: in the vSwitch of an ENI whose addresses are not published right now.
    const pods = [
      { pod: 'd/x', podIP: '192.168.20.9' },
      { pod: 'kube-system/agent', podIP: '192.168.16.200', hostNetwork: true },
      { pod: 'd/y', podIP: '10.9.9.9' },
    ];
    const r = recoverAllocations(emptyState(), p, pods, 5000);
    expect(r.recovered.map((a) => a.ip)).toEqual(['192.168.16.1', '192.168.16.2', '192.168.20.9']);
    expect(r.state.cooling).toEqual({ '192.168.16.3': 60_000 });
    expect(freeAddresses(r.state, p, 5000)).toEqual(['192.168.16.4']);
  });

  it('recovers each address with its interface when status.used or the pod says it, and a DEL frees only its own', () => {
    const p = pool(IPS.slice(0, 6));
    p.status!.used = {
      // What this agent writes now: the interface of each address.
      '192.168.16.1': { pod: 'd/a', containerID: 'c1', ifName: 'eth0' },
      '192.168.16.2': { pod: 'd/a', containerID: 'c1', ifName: 'net1' },
      // What an older agent wrote (no interface): the pod list tells it.
      '192.168.16.3': { pod: 'd/b', containerID: 'c2' },
      '192.168.16.4': { pod: 'd/b', containerID: 'c2' },
      // Nothing tells: d/c is not in the pod list.
      '192.168.16.5': { pod: 'd/c', containerID: 'c3' },
      '192.168.16.6': { pod: 'd/c', containerID: 'c3' },
    };
    const b = {
      pod: 'd/b',
      podIP: '192.168.16.3',
      interfaces: podInterfaces(['192.168.16.3'], {
        [NETWORK_STATUS_ANNOTATION]: JSON.stringify([
          { name: 'k8s-pod-network', interface: 'eth0', ips: ['192.168.16.3'], default: true },
          { name: 'd/second', interface: 'net1', ips: ['192.168.16.4'] },
        ]),
      }),
    };
    const r = recoverAllocations(emptyState(), p, [b], 5);
    expect(Object.fromEntries(r.recovered.map((a) => [a.ip, `${a.containerId}/${a.ifName}`]))).toEqual({
      '192.168.16.1': 'c1/eth0',
      '192.168.16.2': 'c1/net1',
      '192.168.16.3': 'c2/eth0',
      '192.168.16.4': 'c2/net1',
      '192.168.16.5': 'c3/*',
      '192.168.16.6': 'c3/*',
    });
    // The interfaces are written back, so a later recovery keeps them too (none for the unknown).
    expect(agentStatus(r.state, p, 5).used['192.168.16.2']).toEqual({ pod: 'd/a', containerID: 'c1', ifName: 'net1' });
    expect(agentStatus(r.state, p, 5).used['192.168.16.5']).toEqual({ pod: 'd/c', containerID: 'c3' });
    // A DEL for net1 frees net1's address only; eth0's stays with its pod.
    const del = release(r.state, 'c1', 'net1', 10, 1000);
    expect(del.released).toEqual(['192.168.16.2']);
    expect(release(r.state, 'c2', 'net1', 10, 1000).released).toEqual(['192.168.16.4']);
    // An ADD retried for a recovered interface gets its own address back, not a new one.
    expect(allocate(del.state, p, { containerId: 'c1', ifName: 'eth0', pod: 'd/a' }, 11)).toMatchObject({
      lease: { ip: '192.168.16.1' },
      fresh: false,
    });
    // Unknown interfaces: a DEL of one (a failed ADD's cleanup, say) must not free another's address.
    expect(release(r.state, 'c3', 'net1', 10, 1000).released).toEqual([]);
    expect(release(r.state, 'c3', undefined, 10, 1000).released.sort()).toEqual(['192.168.16.5', '192.168.16.6']);
    // Gone with the pod, whatever was known.
    expect(
      departedRecoveries(r.state, [b])
        .map((a) => a.ip)
        .sort(),
    ).toEqual(['192.168.16.1', '192.168.16.2', '192.168.16.5', '192.168.16.6']);
  });

  it('never lets two recovered addresses share one interface name: the second stays apart', () => {
    const p = pool(IPS.slice(0, 4));
    const held = allocate(emptyState(), p, { containerId: 'c1', ifName: 'eth0', pod: 'd/a' }, 0);
    if ('error' in held) throw new Error('no lease');
    p.status!.used = {
      '192.168.16.2': { pod: 'd/a', containerID: 'c1', ifName: 'eth0' }, // contradicts the state file
      '192.168.16.3': { pod: 'd/x', containerID: 'c9', ifName: 'eth0' },
      '192.168.16.4': { pod: 'd/x', containerID: 'c9', ifName: 'eth0' },
    };
    const r = recoverAllocations(held.state, p, [], 5);
    const ips = Object.values(r.state.allocations)
      .map((a) => a.ip)
      .sort();
    expect(ips).toEqual(['192.168.16.1', '192.168.16.2', '192.168.16.3', '192.168.16.4']);
    expect(freeAddresses(r.state, p, 5)).toEqual([]);
    expect(r.state.allocations['c1/eth0']!.ip).toBe('192.168.16.1');
  });

  it('reads which interface holds which address from a pod: podIPs are eth0, Multus names the rest', () => {
    expect(podInterfaces(['10.0.0.1'], undefined)).toEqual({ '10.0.0.1': 'eth0' });
    expect(
      podInterfaces(['10.0.0.1'], {
        [NETWORK_STATUS_ANNOTATION]: JSON.stringify([
          { interface: 'net1', ips: ['10.0.0.2', 7] },
          { ips: ['10.0.0.3'] },
        ]),
      }),
    ).toEqual({ '10.0.0.1': 'eth0', '10.0.0.2': 'net1' });
    expect(podInterfaces([], { [NETWORK_STATUS_ANNOTATION]: 'not json' })).toEqual({});
  });

  it('hands out nothing from a pool that is being deleted', () => {
    const p = pool(IPS.slice(0, 2));
    p.metadata.deletionTimestamp = '2026-01-01T00:00:00Z';
    expect(allocate(emptyState(), p, { containerId: 'c1', ifName: 'eth0', pod: 'd/a' }, 0)).toMatchObject({
      error: 'pool-empty',
    });
  });
});

describe('agent allocation from /28 prefixes', () => {
  const P1 = '192.168.16.16/28';
  const P2 = '192.168.16.32/28';
  const addressesOf = (p: string) =>
    Array.from({ length: 16 }, (_, k) => `192.168.16.${Number(p.split('.')[3]!.split('/')[0]) + k}`);
  function prefixPool(requested: string[] = []): ENIPool {
    const p = pool([...addressesOf(P1), ...addressesOf(P2)], { requested });
    p.status!.enis![0]!.prefixes = [P1, P2];
    return p;
  }
  const take = (state: AgentState, p: ENIPool, id: string) => {
    const r = allocate(state, p, { containerId: id, ifName: 'eth0', pod: `default/${id}` }, 0);
    if ('error' in r) throw new Error('pool empty');
    return r;
  };

  it('fills the fullest prefix first, so that whole prefixes become free', () => {
    const p = prefixPool();
    // A pod of the second prefix stays: the next pods join it, not the empty first prefix.
    let state: AgentState = {
      allocations: {
        'old/eth0': {
          ip: addressesOf(P2)[7]!,
          pod: 'default/old',
          containerId: 'old',
          ifName: 'eth0',
          eniId: 'eni-a',
          allocatedAt: 0,
        },
      },
      cooling: {},
    };
    const ips: string[] = [];
    for (let i = 0; i < 15; i++) {
      const r = take(state, p, `c${i}`);
      state = r.state;
      ips.push(r.lease.ip);
    }
    expect(ips.every((ip) => addressesOf(P2).includes(ip))).toBe(true);
    // Full: the next goes to the other prefix.
    expect(addressesOf(P1)).toContain(take(state, p, 'c15').lease.ip);
  });

  it('a prefix requested for release leaves the free list whole, and one ack answers for all its addresses', () => {
    const p = prefixPool([P1]);
    expect(freeAddresses(emptyState(), p, 0).some((ip) => addressesOf(P1).includes(ip))).toBe(false);
    expect(agentStatus(emptyState(), p, 0).releaseAcks).toEqual({
      [P1]: { answer: 'ready', requestedAt: '2026-01-01T00:00:00Z' },
    });
    // One address of it in use (taken before the request), or cooling down: refused, or no answer yet.
    const holder: AgentState = {
      allocations: {
        'x/eth0': {
          ip: addressesOf(P1)[4]!,
          pod: 'default/x',
          containerId: 'x',
          ifName: 'eth0',
          eniId: 'eni-a',
          allocatedAt: 0,
        },
      },
      cooling: {},
    };
    expect(agentStatus(holder, p, 0).releaseAcks[P1]!.answer).toBe('do-not-release');
    const cooling: AgentState = { allocations: {}, cooling: { [addressesOf(P1)[4]!]: 5000 } };
    expect(agentStatus(cooling, p, 0).releaseAcks).toEqual({});
    // A prefix the pool does not hold is not this agent's to give.
    expect(agentStatus(emptyState(), prefixPool(['192.168.16.64/28']), 0).releaseAcks['192.168.16.64/28']!.answer).toBe(
      'do-not-release',
    );
  });
});
