import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { excess, needed, resolveMaxAllocate, toAllocate, type Sizing, type Usage } from '../../src/ipam/sizing.js';

const sizing = fc
  .record({
    minAllocate: fc.nat(40),
    preAllocate: fc.nat(20),
    maxAboveWatermark: fc.nat(10),
    maxAllocate: fc.integer({ min: 1, max: 120 }),
  })
  .filter((s) => s.minAllocate <= s.maxAllocate);
const usage = (max: number) =>
  fc.record({ available: fc.nat(max), used: fc.nat(max), pending: fc.nat(30) }).filter((u) => u.used <= u.available);

describe('pool sizing', () => {
  it('follows Cilium on the documented cases', () => {
    const s: Sizing = { minAllocate: 0, preAllocate: 8, maxAboveWatermark: 0, maxAllocate: 100 };
    expect(needed(s, { available: 0, used: 0, pending: 0 })).toBe(8);
    expect(needed(s, { available: 10, used: 5, pending: 0 })).toBe(3);
    expect(needed({ ...s, minAllocate: 20 }, { available: 10, used: 0, pending: 0 })).toBe(10);
    expect(needed(s, { available: 96, used: 95, pending: 0 })).toBe(4); // capped by maxAllocate
    expect(needed(s, { available: 10, used: 5, pending: 6 })).toBe(9); // surge for pending pods
    expect(excess(s, { available: 30, used: 5, pending: 0 })).toBe(17);
    expect(excess({ ...s, minAllocate: 10, maxAboveWatermark: 4 }, { available: 12, used: 3, pending: 0 })).toBe(0);
    expect(resolveMaxAllocate(0, 42)).toBe(42);
    expect(resolveMaxAllocate(10, 42)).toBe(10);
    expect(resolveMaxAllocate(100, 42)).toBe(42);
  });

  it('never asks beyond maxAllocate, and meets the need when the ceiling allows', () => {
    fc.assert(
      fc.property(sizing, fc.nat(120), fc.nat(120), fc.nat(30), (s, a, u, pending) => {
        fc.pre(u <= a && a <= s.maxAllocate);
        const usage: Usage = { available: a, used: u, pending };
        const add = toAllocate(s, usage);
        expect(add).toBeGreaterThanOrEqual(needed(s, usage));
        expect(a + add).toBeLessThanOrEqual(s.maxAllocate);
        if (a + s.preAllocate + pending - (a - u) <= s.maxAllocate)
          expect(a + add - u - pending).toBeGreaterThanOrEqual(Math.min(s.preAllocate, s.maxAllocate));
      }),
    );
  });

  it('never counts an IP in use, or one a pending pod will take, as excess', () => {
    fc.assert(
      fc.property(sizing, usage(150), (s, u) => {
        const e = excess(s, u);
        expect(e).toBeGreaterThanOrEqual(0);
        expect(e).toBeLessThanOrEqual(Math.max(0, u.available - u.used - u.pending));
      }),
    );
  });

  it('never wants IPs and releases them at once', () => {
    fc.assert(
      fc.property(sizing, usage(150), (s, u) => {
        expect(needed(s, u) > 0 && excess(s, u) > 0).toBe(false);
      }),
    );
  });

  it('is at rest after one allocation step: no further need, no excess', () => {
    fc.assert(
      fc.property(sizing, usage(120), (s, u) => {
        fc.pre(u.available <= s.maxAllocate);
        const after: Usage = { ...u, available: u.available + toAllocate(s, u) };
        expect(needed(s, after)).toBe(0);
        if (toAllocate(s, u) > 0) expect(excess(s, after)).toBe(0);
      }),
    );
  });
});
