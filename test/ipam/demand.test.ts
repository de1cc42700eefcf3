import { describe, expect, it } from '@jest/globals';
import { DEMAND_WINDOW_MS, batchHorizonMs, batchOf, keepPeak, observeDemand } from '../../src/ipam/demand.js';

const T = 1_000_000;

describe('demand learned from the addresses in use', () => {
  it('counts nothing on the first look: what was in use before says nothing of the rate', () => {
    const first = observeDemand(undefined, ['10.0.0.1', '10.0.0.2'], T, 60_000);
    expect(first.takenAt).toEqual([]);
    expect(batchOf(first, 60_000, 16)).toBe(0);
  });

  it('counts each address newly in use once, and forgets takes older than the window', () => {
    let d = observeDemand(undefined, [], T, 60_000);
    d = observeDemand(d, ['a', 'b'], T + 1_000, 60_000);
    d = observeDemand(d, ['a', 'b', 'c'], T + 2_000, 60_000);
    // An address given back and another taken: one take.
    d = observeDemand(d, ['b', 'c', 'd'], T + 3_000, 60_000);
    expect(d.takenAt).toEqual([T + 1_000, T + 1_000, T + 2_000, T + 3_000]);
    d = observeDemand(d, ['b', 'c', 'd'], T + 1_000 + DEMAND_WINDOW_MS, 60_000);
    expect(d.takenAt).toEqual([T + 2_000, T + 3_000]);
  });

  it('scales the takes to the horizon, within the cap; a cap of 0 turns batching off', () => {
    let d = observeDemand(undefined, [], T, 180_000);
    d = observeDemand(d, ['a', 'b', 'c', 'd'], T + 10_000, 180_000);
    expect(batchOf(d, 180_000, 100)).toBe(12); // 4 a minute, for 3 minutes
    expect(batchOf(d, 180_000, 10)).toBe(10);
    expect(batchOf(d, 180_000, 0)).toBe(0);
    expect(batchHorizonMs(0)).toBe(60_000);
    expect(batchHorizonMs(180_000)).toBe(180_000);
  });

  it('follows the peak, which decays after a horizon without a higher one or a growth on it, and to the net at once when the node gives back or stops taking', () => {
    const h = 180_000;
    let d = observeDemand(undefined, [], T, h);
    d = observeDemand(d, ['a', 'b', 'c'], T + 1_000, h);
    d = observeDemand(d, ['a', 'b', 'c', 'd'], T + 50_000, h);
    d = observeDemand(d, ['a', 'b', 'c', 'd'], T + 61_500, h); // three takes left the window; the peak stays
    expect(d.takenAt).toEqual([T + 50_000]);
    expect(batchOf(d, h, 16)).toBe(12); // 4 a minute at the peak, for 3 minutes
    d = keepPeak(d, T + 61_500); // a growth carried the batch: kept a horizon from then
    d = observeDemand(d, ['a', 'b', 'c', 'd', 'e'], T + 100_000, h);
    expect(batchOf(d, h, 16)).toBe(12);
    // No take left in the window: the node no longer grows, the batch is gone.
    d = observeDemand(d, ['a', 'b', 'c', 'd', 'e'], T + 161_000, h);
    expect(batchOf(d, h, 16)).toBe(0);
  });

  it('counts growth net of what the node gives back: pods that come and go need no batch', () => {
    let d = observeDemand(undefined, ['a', 'b'], T, 60_000);
    d = observeDemand(d, ['a', 'b', 'c', 'd', 'e'], T + 5_000, 60_000);
    expect(batchOf(d, 60_000, 16)).toBe(3);
    // Four leave, one more comes: taken 4, given back 4.
    d = observeDemand(d, ['a', 'f'], T + 10_000, 60_000);
    expect([d.takenAt.length, d.givenAt.length]).toEqual([4, 4]);
    expect(batchOf(d, 60_000, 16)).toBe(0);
  });
});
