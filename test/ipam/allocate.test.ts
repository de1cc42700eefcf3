import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { callsOf, planAllocation, type AllocationInput, type EniView } from '../../src/ipam/allocate.js';

const limitsArb = fc.record({
  eniQuantity: fc.integer({ min: 1, max: 6 }),
  ipv4PerEni: fc.integer({ min: 2, max: 20 }),
});

/** A node's state: ENIs within the instance limits, vSwitches with some free addresses. */
const inputArb = (vSwitchCount: { min: number; max: number }) =>
  limitsArb.chain((limits) =>
    fc
      .record({
        want: fc.nat(60),
        limits: fc.constant(limits),
        vSwitches: fc
          .array(fc.record({ free: fc.nat(40), blocked: fc.nat(4).map((n) => n === 0) }), {
            minLength: vSwitchCount.min,
            maxLength: vSwitchCount.max,
          })
          .map((vs) => vs.map((v, i) => ({ ...v, id: `vsw-${i}` }))),
        selection: fc.constantFrom('MostFreeIPs' as const, 'Ordered' as const),
        enis: fc.array(
          fc.record({
            attached: fc.nat(4).map((n) => n > 0),
            ips: fc.integer({ min: 1, max: limits.ipv4PerEni }),
            vsw: fc.nat(3),
          }),
          { maxLength: Math.max(0, limits.eniQuantity - 1) },
        ),
        creating: fc.nat(1),
      })
      .map((r) => ({
        ...r,
        creating: Math.min(r.creating, Math.max(0, limits.eniQuantity - 1 - r.enis.length)),
        enis: r.enis.map((e, i): EniView => ({
          id: `eni-${i}`,
          attached: e.attached,
          ips: e.ips,
          vSwitchId: `vsw-${e.vsw % Math.max(1, r.vSwitches.length)}`,
        })),
      })),
  );

/** Every plan the planner could choose, searched exhaustively: the best (IPs, calls) pair. */
function bruteForce(input: AllocationInput): { planned: number; calls: number } {
  const free = input.vSwitches.filter((v) => !v.blocked).reduce((n, v) => n + v.free, 0);
  const usable = new Set(input.vSwitches.filter((v) => !v.blocked && v.free > 0).map((v) => v.id));
  const roomy = input.enis
    .filter((e) => e.attached && usable.has(e.vSwitchId))
    .map((e) => input.limits.ipv4PerEni - e.ips)
    .filter((r) => r > 0);
  const slots = Math.max(0, input.limits.eniQuantity - 1 - input.enis.length - (input.creating ?? 0));
  const perEni = Math.min(input.limits.ipv4PerEni, 50);
  let best = { planned: 0, calls: 0 };
  for (let mask = 0; mask < 1 << roomy.length; mask++) {
    const chosen = roomy.filter((_, i) => mask & (1 << i));
    for (let n = 0; n <= slots; n++) {
      const room = chosen.reduce((a, b) => a + b, 0) + n * perEni;
      // Each new ENI's own primary address comes from the vSwitch too (one vSwitch here).
      const planned = Math.min(input.want, room, free - n);
      // Every call must add at least one IP; otherwise it is not part of a sensible plan.
      if (chosen.length + n > planned) continue;
      const calls = chosen.length + 2 * n;
      if (planned > best.planned || (planned === best.planned && calls < best.calls)) best = { planned, calls };
    }
  }
  return best;
}

describe('allocation planning', () => {
  it('fills an attached ENI with one call before creating any', () => {
    const plan = planAllocation({
      want: 5,
      limits: { eniQuantity: 4, ipv4PerEni: 15 },
      enis: [{ id: 'eni-a', vSwitchId: 'vsw-1', attached: true, ips: 6 }],
      vSwitches: [{ id: 'vsw-1', free: 100 }],
      selection: 'MostFreeIPs',
    });
    expect(plan).toEqual({ ops: [{ kind: 'assign', eniId: 'eni-a', vSwitchId: 'vsw-1', count: 5 }], planned: 5 });
  });

  it('creates ENIs carrying all their IPs, in the vSwitch with the most free addresses', () => {
    const plan = planAllocation({
      want: 20,
      limits: { eniQuantity: 4, ipv4PerEni: 15 },
      enis: [],
      vSwitches: [
        { id: 'vsw-small', free: 30 },
        { id: 'vsw-big', free: 200 },
      ],
      selection: 'MostFreeIPs',
    });
    expect(plan.ops).toEqual([
      { kind: 'create', vSwitchId: 'vsw-big', ips: 15 },
      { kind: 'create', vSwitchId: 'vsw-big', ips: 5 },
    ]);
    const ordered = planAllocation({
      want: 20,
      limits: { eniQuantity: 4, ipv4PerEni: 15 },
      enis: [],
      vSwitches: [
        { id: 'vsw-small', free: 30 },
        { id: 'vsw-big', free: 200 },
      ],
      selection: 'Ordered',
    });
    expect(ordered.ops.map((o) => o.vSwitchId)).toEqual(['vsw-small', 'vsw-small']);
  });

  it('prefers one new ENI to three small fills', () => {
    const plan = planAllocation({
      want: 12,
      limits: { eniQuantity: 5, ipv4PerEni: 15 },
      enis: ['a', 'b', 'c'].map((id) => ({ id: `eni-${id}`, vSwitchId: 'vsw-1', attached: true, ips: 11 })),
      vSwitches: [{ id: 'vsw-1', free: 100 }],
      selection: 'MostFreeIPs',
    });
    expect(plan.ops).toEqual([{ kind: 'create', vSwitchId: 'vsw-1', ips: 12 }]);
  });

  it('moves on from a blocked or exhausted vSwitch and says why it falls short', () => {
    const input: AllocationInput = {
      want: 10,
      limits: { eniQuantity: 3, ipv4PerEni: 6 },
      enis: [],
      vSwitches: [
        { id: 'vsw-full', free: 0 },
        { id: 'vsw-blocked', free: 50, blocked: true },
        { id: 'vsw-ok', free: 4 },
      ],
      selection: 'Ordered',
    };
    expect(planAllocation(input)).toEqual({
      // 4 free: 3 for pods, 1 for the new ENI's own primary.
      ops: [{ kind: 'create', vSwitchId: 'vsw-ok', ips: 3 }],
      planned: 3,
      shortfall: 'vswitch-exhausted',
    });
    expect(planAllocation({ ...input, vSwitches: [{ id: 'vsw-ok', free: 100 }], want: 20 })).toMatchObject({
      planned: 12,
      shortfall: 'instance-limit',
    });
  });

  it('never plans beyond instance, ENI or vSwitch limits, with or without a batch', () => {
    fc.assert(
      fc.property(inputArb({ min: 0, max: 4 }), fc.oneof(fc.constant(0), fc.nat(30)), (withoutExtra, extra) => {
        const input = { ...withoutExtra, extra };
        const plan = planAllocation(input);
        const slots = input.limits.eniQuantity - 1 - input.enis.length - (input.creating ?? 0);
        const creates = plan.ops.filter((o) => o.kind === 'create');
        expect(creates.length).toBeLessThanOrEqual(Math.max(0, slots));
        const perVsw = new Map<string, number>();
        const perEni = new Map<string, number>();
        for (const op of plan.ops) {
          const count = op.kind === 'assign' ? op.count : op.ips;
          expect(count).toBeGreaterThan(0);
          // A create takes its ENI's own primary from the vSwitch as well.
          perVsw.set(op.vSwitchId, (perVsw.get(op.vSwitchId) ?? 0) + count + (op.kind === 'create' ? 1 : 0));
          if (op.kind === 'assign') perEni.set(op.eniId, (perEni.get(op.eniId) ?? 0) + count);
          else expect(count).toBeLessThanOrEqual(Math.min(input.limits.ipv4PerEni, 50));
        }
        for (const [id, n] of perVsw) {
          const v = input.vSwitches.find((x) => x.id === id)!;
          expect(v.blocked).toBeFalsy();
          expect(n).toBeLessThanOrEqual(v.free);
        }
        for (const [id, n] of perEni) {
          const e = input.enis.find((x) => x.id === id)!;
          expect(e.attached).toBe(true);
          expect(e.ips + n).toBeLessThanOrEqual(input.limits.ipv4PerEni);
          expect(perEni.get(id)).toBe(n);
        }
        expect(plan.planned).toBe(plan.ops.reduce((n, op) => n + (op.kind === 'assign' ? op.count : op.ips), 0));
        expect(plan.planned).toBeLessThanOrEqual(input.want + extra);
        expect(plan.shortfall === undefined).toBe(plan.planned >= input.want);
      }),
      { numRuns: 500 },
    );
  });

  it('carries a batch only in calls the want makes anyway, and judges a shortfall on the want alone', () => {
    fc.assert(
      fc.property(inputArb({ min: 0, max: 4 }), fc.integer({ min: 1, max: 30 }), (input, extra) => {
        const alone = planAllocation(input);
        const batched = planAllocation({ ...input, extra });
        expect(callsOf(batched.ops)).toBeLessThanOrEqual(callsOf(alone.ops));
        const creates = (p: typeof alone) => p.ops.filter((op) => op.kind === 'create').length;
        expect(creates(batched)).toBeLessThanOrEqual(creates(alone));
        expect(batched.planned).toBeGreaterThanOrEqual(alone.planned);
        expect(batched.shortfall).toBe(alone.shortfall);
        if (alone.planned === 0) expect(batched.ops).toEqual([]);
      }),
      { numRuns: 1000 },
    );
  });

  it('fills each call of a growth step with the batch: the ENI’s room, then a whole new ENI', () => {
    const limits = { eniQuantity: 4, ipv4PerEni: 15 };
    const vSwitches = [{ id: 'vsw-a', free: 200 }];
    const attached: EniView = { id: 'eni-1', vSwitchId: 'vsw-a', attached: true, ips: 9 };
    // One address needed: the assign that brings it carries the ENI's whole room (6).
    const fill = planAllocation({ want: 1, extra: 16, enis: [attached], limits, vSwitches, selection: 'MostFreeIPs' });
    expect(fill.ops).toEqual([{ kind: 'assign', eniId: 'eni-1', vSwitchId: 'vsw-a', count: 6 }]);
    // The ENI full: the new ENI carries all it may at creation, not the one address.
    const full = { ...attached, ips: 15 };
    const grow = planAllocation({ want: 1, extra: 16, enis: [full], limits, vSwitches, selection: 'MostFreeIPs' });
    expect(grow.ops).toEqual([{ kind: 'create', vSwitchId: 'vsw-a', ips: 15 }]);
    // Three needed and two of room: one create of 3 + batch beats an assign and a create.
    const nearlyFull = { ...attached, ips: 13 };
    const both = planAllocation({ want: 3, extra: 4, enis: [nearlyFull], limits, vSwitches, selection: 'MostFreeIPs' });
    expect(both.ops).toEqual([{ kind: 'create', vSwitchId: 'vsw-a', ips: 7 }]);
    // Two assigns do not become a create and an attach to carry the batch (found in review).
    const full13 = (id: string, primary?: boolean): EniView => ({
      id,
      vSwitchId: 'vsw-a',
      attached: true,
      ips: 13,
      primary,
    });
    const two = planAllocation({
      want: 4,
      extra: 10,
      enis: [full13('eni-1'), full13('eni-2')],
      limits,
      vSwitches,
      selection: 'MostFreeIPs',
    });
    expect(two.ops.map((op) => op.kind)).toEqual(['assign', 'assign']);
    // The primary ENI's room is used before any create, even where one create would be cheaper.
    const first = planAllocation({
      want: 4,
      enis: [{ ...full13('eni-p', true), ips: 12 }],
      limits,
      vSwitches,
      selection: 'MostFreeIPs',
    });
    expect(first.ops).toEqual([
      { kind: 'assign', eniId: 'eni-p', vSwitchId: 'vsw-a', count: 3 },
      { kind: 'create', vSwitchId: 'vsw-a', ips: 1 },
    ]);
    // A batch that fits no call of the want is not carried.
    expect(
      planAllocation({ want: 0, extra: 16, enis: [attached], limits, vSwitches, selection: 'MostFreeIPs' }).ops,
    ).toEqual([]);
  });

  it('adds as many IPs as possible in the fewest mutating calls (against an exhaustive search)', () => {
    fc.assert(
      fc.property(inputArb({ min: 1, max: 1 }), (input) => {
        const plan = planAllocation(input);
        const best = bruteForce(input);
        expect({ planned: plan.planned, calls: callsOf(plan.ops) }).toEqual(best);
      }),
      { numRuns: 1000 },
    );
  });

  it('converges: applying a plan and planning again adds nothing more once the want is met', () => {
    fc.assert(
      fc.property(inputArb({ min: 1, max: 3 }), (input) => {
        let state = input;
        for (let step = 0; step < 4; step++) {
          const plan = planAllocation(state);
          if (plan.planned === 0) return;
          const enis = state.enis.map((e) => ({ ...e }));
          const vSwitches = state.vSwitches.map((v) => ({ ...v }));
          for (const op of plan.ops) {
            const v = vSwitches.find((x) => x.id === op.vSwitchId)!;
            if (op.kind === 'assign') {
              enis.find((e) => e.id === op.eniId)!.ips += op.count;
              v.free -= op.count;
            } else {
              enis.push({ id: `eni-new-${step}-${enis.length}`, vSwitchId: op.vSwitchId, attached: true, ips: op.ips });
              v.free -= op.ips + 1;
            }
          }
          state = { ...state, enis, vSwitches, want: state.want - plan.planned };
          if (state.want === 0) {
            expect(planAllocation(state).ops).toEqual([]);
            return;
          }
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe('allocation planning in prefix mode (ipv4Mode Prefix)', () => {
  const limits = { eniQuantity: 4, ipv4PerEni: 14 };
  const prefixes = { fallback: true };

  it('a new node gets whole /28s in one create, only as many as the want needs', () => {
    const plan = planAllocation({
      want: 40,
      limits,
      enis: [],
      vSwitches: [{ id: 'vsw-1', free: 500 }],
      selection: 'MostFreeIPs',
      prefixes,
    });
    expect(plan).toEqual({ ops: [{ kind: 'create', vSwitchId: 'vsw-1', ips: 48, prefix: true }], planned: 48 });
  });

  it('an ENI of prefixes takes prefixes, at most 10 a call; one of single IPs keeps taking single IPs', () => {
    const plan = planAllocation({
      want: 200,
      limits: { eniQuantity: 2, ipv4PerEni: 20 },
      enis: [{ id: 'eni-p', vSwitchId: 'vsw-1', attached: true, ips: 16, prefix: true }],
      vSwitches: [{ id: 'vsw-1', free: 1000 }],
      selection: 'MostFreeIPs',
      prefixes,
    });
    expect(plan.ops).toEqual([{ kind: 'assign', eniId: 'eni-p', vSwitchId: 'vsw-1', count: 160, prefix: true }]);
    const mixed = planAllocation({
      want: 5,
      limits,
      enis: [{ id: 'eni-s', vSwitchId: 'vsw-1', attached: true, ips: 3 }],
      vSwitches: [{ id: 'vsw-1', free: 1000 }],
      selection: 'MostFreeIPs',
      prefixes,
    });
    expect(mixed.ops).toEqual([{ kind: 'assign', eniId: 'eni-s', vSwitchId: 'vsw-1', count: 5 }]);
  });

  it('a fragmented vSwitch gets no prefix: single IPs on a new ENI with the fallback, nothing without', () => {
    const input = {
      want: 8,
      limits,
      enis: [{ id: 'eni-p', vSwitchId: 'vsw-1', attached: true, ips: 16, prefix: true }],
      vSwitches: [{ id: 'vsw-1', free: 200, fragmented: true }],
      selection: 'MostFreeIPs' as const,
    };
    expect(planAllocation({ ...input, prefixes }).ops).toEqual([{ kind: 'create', vSwitchId: 'vsw-1', ips: 8 }]);
    const waiting = planAllocation({ ...input, prefixes: { fallback: false } });
    expect(waiting).toMatchObject({ ops: [], planned: 0, shortfall: 'vswitch-exhausted' });
  });

  it('never lets a /28 cross the ceiling: short of it, the ceiling is the reason', () => {
    const input = {
      want: 4,
      limits,
      enis: [{ id: 'eni-p', vSwitchId: 'vsw-1', attached: true, ips: 16, prefix: true }],
      vSwitches: [{ id: 'vsw-1', free: 200 }],
      selection: 'MostFreeIPs' as const,
      prefixes,
    };
    expect(planAllocation({ ...input, ceiling: 10 })).toEqual({ ops: [], planned: 0, shortfall: 'ceiling' });
    expect(planAllocation({ ...input, ceiling: 40, extra: 30 }).planned).toBe(32);
  });

  it('needs at most a third of the calls single IPs need for the same growth (ecs.g7.xlarge, 4 ENIs × 15)', () => {
    const grow = (withPrefixes: boolean) =>
      callsOf(
        planAllocation({
          want: 120,
          limits: { eniQuantity: 4, ipv4PerEni: 14 },
          enis: [],
          vSwitches: [{ id: 'vsw-1', free: 2000 }],
          selection: 'MostFreeIPs',
          ...(withPrefixes ? { prefixes } : {}),
        }).ops,
      );
    // 120 single IPs need all 3 secondary ENIs (42 IPs) and fall short; 8 prefixes fit in one create.
    expect(grow(true)).toBe(2);
    expect(grow(false)).toBe(6);
  });
});
