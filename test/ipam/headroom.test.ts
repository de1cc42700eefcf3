import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { HEADROOM_WINDOW, forecastFree, maxSamples, recordFree, type FreeSample } from '../../src/ipam/headroom.js';

const T = 1_700_000_000_000;
const MIN = 60_000;
/** The history after readings at the given times (ms after T) and counts, in that order. */
const readings = (points: Array<[number, number]>): FreeSample[] =>
  points.reduce<FreeSample[]>((h, [at, free]) => recordFree(h, { at: T + at, free }), []);

/** Readings every `stepMs`, `n` of them, starting from `free0` and losing `perStep` each time. */
const linear = fc.record({
  free0: fc.integer({ min: 0, max: 65_000 }),
  perStep: fc.integer({ min: -200, max: 200 }),
  stepMs: fc.integer({ min: HEADROOM_WINDOW.minGapMs, max: 5 * MIN }),
  n: fc.integer({ min: 3, max: 80 }),
  lateMs: fc.integer({ min: 0, max: 2 * MIN }),
});

describe('vSwitch headroom forecast', () => {
  it('recovers the rate and the time to exhaustion of a steady decline', () => {
    // 2000 free, 20 taken a minute, read every 5 minutes for 25 minutes: 1500 left, 75 minutes to go.
    const h = readings(Array.from({ length: 6 }, (_, k): [number, number] => [k * 5 * MIN, 2000 - 100 * k]));
    const f = forecastFree(h, T + 25 * MIN)!;
    expect(f.consumptionPerSecond).toBeCloseTo(20 / 60, 12);
    expect(f.exhaustionSeconds).toBeCloseTo(75 * 60, 6);
    // A scrape two minutes after the last reading: two minutes' worth are taken since.
    expect(forecastFree(h, T + 27 * MIN)!.exhaustionSeconds).toBeCloseTo(73 * 60, 6);
  });

  it('says nothing before its readings span ten minutes, or with fewer than three', () => {
    expect(forecastFree(readings([[0, 100]]), T)).toBeUndefined();
    expect(
      forecastFree(
        readings([
          [0, 100],
          [MIN, 90],
          [9 * MIN, 10],
        ]),
        T + 9 * MIN,
      ),
    ).toBeUndefined();
    expect(
      forecastFree(
        readings([
          [0, 100],
          [10 * MIN, 90],
        ]),
        T + 10 * MIN,
      ),
    ).toBeUndefined();
    // Readings older than the window do not count: a vSwitch not described for long has no forecast.
    const old = readings([
      [0, 100],
      [5 * MIN, 90],
      [10 * MIN, 80],
    ]);
    expect(forecastFree(old, T + 10 * MIN)).toBeDefined();
    expect(forecastFree(old, T + 10 * MIN + HEADROOM_WINDOW.windowMs)).toBeUndefined();
  });

  it('forecasts no exhaustion for a steady count, and a negative consumption while addresses come back', () => {
    fc.assert(
      fc.property(linear, ({ free0, perStep, stepMs, n, lateMs }) => {
        const points = Array.from({ length: n }, (_, k): [number, number] => [k * stepMs, free0]);
        const steady = forecastFree(readings(points), T + (n - 1) * stepMs + lateMs);
        if (steady) expect(steady).toEqual({ consumptionPerSecond: 0 });
        const back = points.map(([at], k): [number, number] => [at, free0 + Math.abs(perStep) * k]);
        const returning = forecastFree(readings(back), T + (n - 1) * stepMs + lateMs);
        if (returning) {
          expect(returning.exhaustionSeconds).toBeUndefined();
          expect(returning.consumptionPerSecond).toBeLessThanOrEqual(0);
          if (perStep !== 0) expect(returning.consumptionPerSecond).toBeLessThan(0);
        }
      }),
    );
  });

  it('recovers the slope of any linear decline it forecasts, and when it reaches zero', () => {
    fc.assert(
      fc.property(linear, ({ free0, perStep, stepMs, n, lateMs }) => {
        const taken = Math.abs(perStep) || 1;
        const start = free0 + taken * n; // never below 0 within the readings
        const points = Array.from({ length: n }, (_, k): [number, number] => [k * stepMs, start - taken * k]);
        const lastAt = (n - 1) * stepMs;
        const h = readings(points);
        const f = forecastFree(h, T + lastAt + lateMs);
        const span = h.at(-1)!.at - h.filter((s) => s.at >= T + lastAt + lateMs - HEADROOM_WINDOW.windowMs)[0]!.at;
        // A forecast exactly when the readings of the window span enough time.
        expect(f !== undefined).toBe(span >= HEADROOM_WINDOW.minSpanMs);
        if (!f) return;
        const rate = taken / (stepMs / 1000);
        expect(f.consumptionPerSecond).toBeCloseTo(rate, 9);
        const lastFree = start - taken * (n - 1);
        const expected = Math.max(0, lastFree / rate - lateMs / 1000);
        expect(Math.abs(f.exhaustionSeconds! - expected)).toBeLessThanOrEqual(1e-6 * Math.max(1, expected));
      }),
    );
  });

  it('keeps a bounded, ordered history within the window, and forecasts only finite, non-negative times', () => {
    // Bursts (a describe a second) as well as quiet spells.
    const dt = fc.oneof(
      { arbitrary: fc.integer({ min: 0, max: 2_000 }), weight: 4 },
      { arbitrary: fc.integer({ min: 0, max: 10 * MIN }), weight: 1 },
    );
    const sample = fc.record({ dt, free: fc.nat(70_000) });
    fc.assert(
      fc.property(
        fc.array(sample, { minLength: 1, maxLength: 300, size: 'max' }),
        fc.nat(HEADROOM_WINDOW.windowMs),
        (steps, lateMs) => {
          let h: FreeSample[] = [];
          let at = T;
          // Checked after each reading; one expect at the end (expect is slow in a loop this long).
          const broken: string[] = [];
          for (const { dt, free } of steps) {
            at += dt;
            h = recordFree(h, { at, free });
            if (h.length > maxSamples()) broken.push(`${h.length} readings kept`);
            if (h.at(-1)!.at !== at || h.at(-1)!.free !== free) broken.push('the newest reading is not last');
            if (h[0]!.at < at - HEADROOM_WINDOW.windowMs) broken.push('a reading older than the window is kept');
            if (h.some((s, i) => i > 0 && s.at < h[i - 1]!.at)) broken.push('readings out of order');
          }
          expect(broken.slice(0, 3)).toEqual([]);
          const f = forecastFree(h, at + lateMs);
          if (!f) return;
          expect(Number.isFinite(f.consumptionPerSecond)).toBe(true);
          if (f.exhaustionSeconds !== undefined) {
            expect(f.consumptionPerSecond).toBeGreaterThan(0);
            expect(Number.isFinite(f.exhaustionSeconds)).toBe(true);
            expect(f.exhaustionSeconds).toBeGreaterThanOrEqual(0);
          } else expect(f.consumptionPerSecond).toBeLessThanOrEqual(0);
        },
      ),
    );
  });

  it('merges a burst of readings into the newest, and forgets what came after a clock stepped back', () => {
    const burst = readings([
      [0, 100],
      [MIN, 99],
      [MIN + 1_000, 98],
      [MIN + 2_000, 97],
    ]);
    expect(burst.map((s) => s.free)).toEqual([100, 99, 97]);
    const back = recordFree(burst, { at: T + 30_000, free: 50 });
    expect(back).toEqual([
      { at: T, free: 100 },
      { at: T + 30_000, free: 50 },
    ]);
  });
});
