import { describe, expect, it } from '@jest/globals';
import {
  batchHorizonMs,
  batchOf,
  carry,
  growthOf,
  keptBatch,
  observeDemand,
  type Demand,
} from '../../src/ipam/demand.js';

const T = 1_000_000;
const H = 60_000;
/** Looks at the counts given, at the times given (ms after T). */
const looks = (...points: Array<[number, number]>): Demand =>
  points.reduce<Demand | undefined>((d, [at, inUse]) => observeDemand(d, inUse, T + at, H), undefined)!;

describe('demand learned from the addresses in use', () => {
  it('counts nothing on the first look: what was in use before says nothing of the rate', () => {
    const first = looks([0, 30]);
    expect(growthOf(first, 30, T)).toBe(0);
    expect(batchOf(first, 30, T, H, 16)).toBe(0);
  });

  it('measures growth over a minute: in use now above the most in use a minute ago', () => {
    // One more every 5 s for two minutes.
    const d = looks(...Array.from({ length: 25 }, (_, k): [number, number] => [k * 5_000, k]));
    expect(growthOf(d, 24, T + 120_000)).toBe(12);
    expect(batchOf(d, 24, T + 120_000, H, 16)).toBe(12);
    expect(batchOf(d, 24, T + 120_000, H, 10)).toBe(10);
    expect(batchOf(d, 24, T + 120_000, H, 0)).toBe(0);
    // Scaled to a longer horizon (a release delay of 3 min): what the node takes in that time.
    expect(batchOf(d, 24, T + 120_000, 180_000, 64)).toBe(36);
    expect(batchHorizonMs(0)).toBe(60_000);
    expect(batchHorizonMs(180_000)).toBe(180_000);
  });

  it('sees no growth in pods that go and come back (a rollout), nor in a node that shrinks', () => {
    const rollout = looks([0, 30], [20_000, 0], [40_000, 30], [85_000, 30]);
    expect(growthOf(rollout, 30, T + 85_000)).toBe(0);
    const shrinking = looks([0, 30], [30_000, 20], [70_000, 10]);
    expect(batchOf(shrinking, 10, T + 70_000, H, 16)).toBe(0);
    // A burst of 200 and 150 of them gone again within the minute: shrinking, not growing by 50.
    const burst = looks([0, 0], [10_000, 200], [20_000, 50]);
    expect(batchOf(burst, 50, T + 20_000, H, 16)).toBe(0);
  });

  it("measures a young node's growth from its first look, not from the most its first step saw", () => {
    // A release delay of 3 min: a step is 15 s. One more every 2 s, all within the first step.
    const young = Array.from({ length: 8 }, (_, k): [number, number] => [k * 2_000, k]);
    const d = young.reduce<Demand | undefined>((m, [at, n]) => observeDemand(m, n, T + at, 180_000), undefined)!;
    expect(d.samples).toHaveLength(1);
    expect(growthOf(d, 7, T + 14_000)).toBe(7);
    expect(batchOf(d, 7, T + 14_000, 180_000, 16)).toBe(16);
  });

  it('does not batch for one address a minute: too slow to be worth it', () => {
    const slow = looks([0, 0], [50_000, 1], [100_000, 2]);
    expect(batchOf(slow, 2, T + 100_000, H, 16)).toBe(0);
  });

  it('after a gap of two horizons without a look (an outage, a new leader), starts over', () => {
    const before = looks([0, 0], [30_000, 10]);
    const after = observeDemand(before, 40, T + 30_000 + 2 * H + 1, H);
    expect(growthOf(after, 40, T + 30_000 + 2 * H + 1)).toBe(0);
  });

  it('keeps a carried batch while the node grows into it, and a horizon after it stops', () => {
    let d = looks([0, 10]);
    d = carry(d, 8, T, H);
    expect(keptBatch(d, 0)).toBe(8);
    d = observeDemand(d, 12, T + 50_000, H); // still taking: kept a horizon from now
    d = observeDemand(d, 12, T + 100_000, H);
    expect(keptBatch(d, 0)).toBe(8);
    d = observeDemand(d, 12, T + 111_000, H);
    expect(keptBatch(d, 0)).toBe(0);
    expect(keptBatch(d, 3)).toBe(3);
  });

  it('drops a carried batch when the node gives addresses back (it is not growing into it)', () => {
    let d = looks([0, 10]);
    d = carry(d, 8, T, H);
    d = observeDemand(d, 9, T + 5_000, H);
    expect(keptBatch(d, 0)).toBe(0);
  });
});
