import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { planRelease, type Ack, type ReleaseInput } from '../../src/ipam/release.js';

const enisArb = fc.array(fc.nat(6), { minLength: 1, maxLength: 4 }).map((counts) =>
  counts.map((n, e) => ({
    id: `eni-${e}`,
    primaryIp: `10.0.${e}.1`,
    secondaryIps: Array.from({ length: n }, (_, k) => `10.0.${e}.${k + 2}`),
  })),
);

const T0 = '2026-01-01T00:00:00.000Z';
const T1 = '2026-01-01T00:00:05.000Z';
const ready = (requestedAt = T1): Ack => ({ answer: 'ready', requestedAt });
const refused = (requestedAt = T1): Ack => ({ answer: 'do-not-release', requestedAt });

const inputArb = enisArb.chain((enis) => {
  const ips = enis.flatMap((e) => [e.primaryIp, ...e.secondaryIps]);
  return fc.record({
    enis: fc.constant(enis),
    used: fc.subarray(ips).map((a) => new Set(a)),
    excess: fc.nat(ips.length),
    excessSince: fc.option(fc.nat(10_000), { nil: undefined }),
    now: fc.constant(10_000),
    delayMs: fc.constantFrom(0, 5000, 20_000),
    requests: fc.subarray(ips).map((a) => new Map(a.map((ip) => [ip, T1] as const))),
    cooling: fc.subarray(ips).map((a) => new Set(a)),
    acks: fc.subarray(ips).chain((a) =>
      fc
        .tuple(
          ...a.map(() =>
            fc.record({
              answer: fc.constantFrom('ready' as const, 'do-not-release' as const),
              requestedAt: fc.constantFrom(T0, T1),
            }),
          ),
        )
        .map((v) => new Map(a.map((ip, i) => [ip, v[i]!] as const))),
    ),
    deleteEmptyEnis: fc.boolean(),
  });
});

describe('release planning', () => {
  it('waits for the delay, then requests from the emptiest ENI first', () => {
    const base: ReleaseInput = {
      enis: [
        { id: 'eni-busy', primaryIp: '10.0.0.1', secondaryIps: ['10.0.0.2', '10.0.0.3'] },
        { id: 'eni-idle', primaryIp: '10.0.1.1', secondaryIps: ['10.0.1.2', '10.0.1.3'] },
      ],
      used: new Set(['10.0.0.2']),
      excess: 2,
      excessSince: 1000,
      now: 2000,
      delayMs: 5000,
      requests: new Map(),
      acks: new Map(),
      deleteEmptyEnis: false,
    };
    expect(planRelease(base).request).toEqual([]);
    expect(planRelease({ ...base, now: 7000 }).request).toEqual(['10.0.1.2', '10.0.1.3']);
  });

  it('unassigns acknowledged IPs, withdraws refused ones, and deletes an ENI released whole', () => {
    const plan = planRelease({
      enis: [
        { id: 'eni-a', primaryIp: '10.0.0.1', secondaryIps: ['10.0.0.2', '10.0.0.3', '10.0.0.4'] },
        { id: 'eni-b', primaryIp: '10.0.1.1', secondaryIps: ['10.0.1.2'] },
      ],
      used: new Set(['10.0.0.4']),
      excess: 4,
      now: 0,
      delayMs: 0,
      requests: new Map([
        ['10.0.0.2', T1],
        ['10.0.0.3', T1],
        ['10.0.1.2', T1],
      ]),
      acks: new Map([
        ['10.0.0.2', ready()],
        ['10.0.0.3', refused()],
        ['10.0.1.2', ready()],
      ]),
      deleteEmptyEnis: true,
    });
    expect(plan).toEqual({
      request: [],
      withdraw: ['10.0.0.3'],
      unassign: [{ eniId: 'eni-a', ips: ['10.0.0.2'] }],
      deleteEnis: ['eni-b'],
    });
  });

  it('never asks for an ENI’s own primary address (the node’s): an old request for one is withdrawn', () => {
    const plan = planRelease({
      enis: [{ id: 'eni-a', primaryIp: '10.0.0.1', secondaryIps: ['10.0.0.2'] }],
      used: new Set(),
      excess: 2,
      excessSince: 0,
      now: 0,
      delayMs: 0,
      requests: new Map([['10.0.0.1', T1]]),
      acks: new Map([['10.0.0.1', ready()]]),
      deleteEmptyEnis: true,
    });
    expect(plan.withdraw).toEqual(['10.0.0.1']);
    expect(plan.request).toEqual(['10.0.0.2']);
  });

  it('ignores an ack that answers an earlier request for the same IP', () => {
    const base: ReleaseInput = {
      enis: [{ id: 'eni-a', primaryIp: '10.0.0.1', secondaryIps: ['10.0.0.2'] }],
      used: new Set(),
      excess: 1,
      now: 0,
      delayMs: 0,
      requests: new Map([['10.0.0.2', T1]]),
      acks: new Map([['10.0.0.2', ready(T0)]]),
      deleteEmptyEnis: false,
    };
    expect(planRelease(base)).toEqual({ request: [], withdraw: [], unassign: [], deleteEnis: [] });
    expect(planRelease({ ...base, acks: new Map([['10.0.0.2', ready(T1)]]) }).unassign).toEqual([
      { eniId: 'eni-a', ips: ['10.0.0.2'] },
    ]);
  });

  it('neither requests IPs cooling down nor keeps requests for IPs no ENI holds any more', () => {
    const plan = planRelease({
      enis: [{ id: 'eni-a', primaryIp: '10.0.0.1', secondaryIps: ['10.0.0.2', '10.0.0.3'] }],
      used: new Set(),
      cooling: new Set(['10.0.0.2']),
      excess: 2,
      excessSince: 0,
      now: 0,
      delayMs: 0,
      requests: new Map([['10.9.9.9', T1]]),
      acks: new Map([['10.9.9.9', ready()]]),
      deleteEmptyEnis: false,
    });
    expect(plan).toEqual({ request: ['10.0.0.3'], withdraw: ['10.9.9.9'], unassign: [], deleteEnis: [] });
  });

  it('releases a confirmed IP instead of withdrawing it when the excess shrinks', () => {
    const plan = planRelease({
      enis: [{ id: 'eni-a', primaryIp: '10.0.0.1', secondaryIps: ['10.0.0.2', '10.0.0.3'] }],
      used: new Set(),
      excess: 0,
      now: 0,
      delayMs: 0,
      requests: new Map([
        ['10.0.0.2', T1],
        ['10.0.0.3', T1],
      ]),
      acks: new Map([['10.0.0.2', ready()]]),
      deleteEmptyEnis: false,
    });
    expect(plan).toEqual({
      request: [],
      withdraw: ['10.0.0.3'],
      unassign: [{ eniId: 'eni-a', ips: ['10.0.0.2'] }],
      deleteEnis: [],
    });
  });

  it('never requests or releases an IP in use, nor more than the excess (property)', () => {
    fc.assert(
      fc.property(inputArb, (input) => {
        const plan = planRelease(input);
        for (const ip of plan.request) {
          expect(input.used.has(ip)).toBe(false);
          expect(input.cooling!.has(ip)).toBe(false);
        }
        // A request the agent confirmed is released, never withdrawn (unless it names an ENI's primary, the node's).
        for (const ip of plan.withdraw) {
          if (
            input.acks.get(ip)?.answer === 'ready' &&
            input.acks.get(ip)?.requestedAt === input.requests.get(ip) &&
            !input.used.has(ip)
          ) {
            expect(input.enis.some((e) => e.primaryIp === ip)).toBe(true);
          }
        }
        for (const u of plan.unassign) {
          for (const ip of u.ips) {
            expect(input.used.has(ip)).toBe(false);
            expect(input.acks.get(ip)).toEqual(ready(input.requests.get(ip)));
          }
        }
        for (const id of plan.deleteEnis) {
          const eni = input.enis.find((e) => e.id === id)!;
          expect(input.deleteEmptyEnis).toBe(true);
          for (const ip of eni.secondaryIps) {
            expect(input.used.has(ip)).toBe(false);
            expect(input.acks.get(ip)).toEqual(ready(input.requests.get(ip)));
          }
        }
        const outstanding = new Set([...input.requests.keys()].filter((ip) => !plan.withdraw.includes(ip)));
        plan.request.forEach((ip) => outstanding.add(ip));
        if (plan.request.length) expect(outstanding.size).toBeLessThanOrEqual(input.excess);
        for (const ip of outstanding) expect(input.used.has(ip)).toBe(false);
        for (const e of input.enis) expect(plan.request).not.toContain(e.primaryIp);
      }),
      { numRuns: 500 },
    );
  });
});

describe('release of /28 prefixes', () => {
  const P1 = '10.5.0.16/28';
  const P2 = '10.5.0.32/28';
  const members = (p: string) =>
    Array.from({ length: 16 }, (_, k) => `10.5.0.${Number(p.split('.')[3]!.split('/')[0]) + k}`);
  const eni = {
    id: 'eni-p',
    primaryIp: '10.5.0.1',
    secondaryIps: [],
    prefixes: [P1, P2].map((prefix) => ({ prefix, ips: members(prefix) })),
  };
  const base: ReleaseInput = {
    enis: [eni],
    used: new Set([members(P1)[3]!]),
    excess: 20,
    excessSince: 0,
    now: 10_000,
    delayMs: 0,
    requests: new Map(),
    acks: new Map(),
    deleteEmptyEnis: false,
  };

  it('requests only a whole prefix none of whose addresses is used or cooling, when the excess covers all 16', () => {
    expect(planRelease(base).request).toEqual([P2]);
    expect(planRelease({ ...base, excess: 15 }).request).toEqual([]);
    expect(planRelease({ ...base, cooling: new Set([members(P2)[9]!]) }).request).toEqual([]);
  });

  it('one ready ack releases the whole prefix; an address of it taken meanwhile withdraws the request', () => {
    const requested = { ...base, requests: new Map([[P2, T1]]), acks: new Map([[P2, ready()]]) };
    expect(planRelease(requested).unassign).toEqual([{ eniId: 'eni-p', ips: [], prefixes: [P2] }]);
    const taken = planRelease({ ...requested, used: new Set([...base.used, members(P2)[0]!]) });
    expect(taken).toMatchObject({ unassign: [], withdraw: [P2] });
    expect(planRelease({ ...requested, acks: new Map([[P2, refused()]]) }).withdraw).toEqual([P2]);
  });

  it('an ENI whose every prefix is confirmed free is deleted whole', () => {
    const all = {
      ...base,
      used: new Set<string>(),
      excess: 32,
      deleteEmptyEnis: true,
      requests: new Map([
        [P1, T1],
        [P2, T1],
      ]),
      acks: new Map([
        [P1, ready()],
        [P2, ready()],
      ]),
    };
    expect(planRelease(all)).toMatchObject({ deleteEnis: ['eni-p'], unassign: [] });
  });
});
