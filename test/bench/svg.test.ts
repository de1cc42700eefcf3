import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { niceTicks, renderChart } from '../../bench/svg.js';

/** A range [lo, lo + span] whose span is not lost in lo's rounding (a chart's axis, not a float corner). */
const range = fc
  .tuple(fc.double({ min: -1e9, max: 1e9, noNaN: true }), fc.double({ min: 1e-6, max: 1e9, noNaN: true }))
  .filter(([lo, span]) => span >= Math.abs(lo) * 1e-6)
  .map(([lo, span]) => [lo, lo + span] as const);

/** The decimals a label shows. */
const decimals = (label: string) => label.split('.')[1]?.length ?? 0;

describe('axis ticks', () => {
  it('are round values on the usual cases', () => {
    expect(niceTicks(0, 1).labels).toEqual(['0.0', '0.2', '0.4', '0.6', '0.8', '1.0']);
    expect(niceTicks(0, 22.6).labels).toEqual(['0', '5', '10', '15', '20', '25']);
    expect(niceTicks(0, 1000).labels).toEqual(['0', '200', '400', '600', '800', '1000']);
    expect(niceTicks(0, 273.6).values).toEqual([0, 50, 100, 150, 200, 250, 300]);
    expect(niceTicks(0, 0.3).labels).toEqual(['0.00', '0.05', '0.10', '0.15', '0.20', '0.25', '0.30']);
    // Nothing to show still gets an axis.
    expect(niceTicks(0, 0).values).toEqual([0, 0.2, 0.4, 0.6, 0.8, 1]);
    // So does a range too narrow for its values' precision: as an empty one.
    expect(niceTicks(5, 5).labels).toEqual(['5', '6', '7', '8', '9', '10']);
    expect(niceTicks(1e9, 1e9 + 1e-7).values).toEqual(niceTicks(1e9, 1e9).values);
  });

  it('cover the range, evenly, at round multiples of a 1, 2 or 5 × 10^k step, 4 to 8 of them', () => {
    fc.assert(
      fc.property(range, ([lo, hi]) => {
        const { step, values } = niceTicks(lo, hi);
        const mantissa = step / 10 ** Math.floor(Math.log10(step));
        expect([1, 2, 5].some((m) => Math.abs(mantissa - m) < 1e-9)).toBe(true);
        expect(values.length).toBeGreaterThanOrEqual(4);
        expect(values.length).toBeLessThanOrEqual(8);
        expect(values[0]).toBeLessThanOrEqual(lo);
        expect(values.at(-1)).toBeGreaterThanOrEqual(hi);
        // The smallest such axis: no tick wholly outside the range.
        expect(values[1]).toBeGreaterThan(lo);
        expect(values.at(-2)).toBeLessThan(hi);
        for (const [i, v] of values.entries()) {
          expect(Math.abs(v / step - Math.round(v / step))).toBeLessThan(1e-9);
          if (i) expect(Math.abs(v - values[i - 1]! - step)).toBeLessThan(step * 1e-9);
        }
      }),
    );
  });

  it('label each value with the step’s decimals and no float noise', () => {
    fc.assert(
      fc.property(range, fc.integer({ min: 3, max: 12 }), ([lo, hi], maxTicks) => {
        const { step, values, labels } = niceTicks(lo, hi, maxTicks);
        expect(values.length).toBeLessThanOrEqual(maxTicks);
        const places = Math.max(0, -Math.floor(Math.log10(step) + 1e-9));
        for (const [i, label] of labels.entries()) {
          expect(label).toMatch(/^-?\d+(\.\d+)?$/);
          expect(decimals(label)).toBe(places);
          // The label is the value, and the value is the decimal the label says (0.3, not 0.30000000000000004).
          expect(Number(label)).toBe(values[i]);
          expect(String(values[i])).not.toMatch(/\d{12}/);
        }
        expect(new Set(labels).size).toBe(labels.length);
      }),
    );
  });

  it('cover any finite range, however narrow or wide, in at most 8', () => {
    const finite = fc.double({ noNaN: true, min: -1e300, max: 1e300 });
    fc.assert(
      fc.property(finite, finite, (a, b) => {
        const { values } = niceTicks(a, b);
        expect(values.length).toBeGreaterThanOrEqual(2);
        expect(values.length).toBeLessThanOrEqual(8);
        expect(values[0]).toBeLessThanOrEqual(Math.min(a, b));
        expect(values.at(-1)).toBeGreaterThanOrEqual(Math.max(a, b));
      }),
    );
  });

  it('refuse a range that is not finite', () => {
    expect(() => niceTicks(0, Infinity)).toThrow(/finite range/);
    expect(() => niceTicks(NaN, 1)).toThrow(/finite range/);
  });
});

describe('a chart', () => {
  const svg = renderChart({
    title: 'calls <per> second',
    xLabel: 'seconds',
    yLabel: 'calls',
    series: [
      {
        label: 'A',
        color: '#111',
        step: true,
        points: [
          [0, 0],
          [1.3, 0.1],
          [2.6, 0.3],
        ],
      },
      {
        label: 'B',
        color: '#222',
        points: [
          [0, 0.2],
          [2.6, 0.2],
        ],
      },
    ],
    markers: [{ x: 2.1, label: 'bound', color: '#d62728' }],
    levels: [{ y: 0.25, label: 'quota 0.25/s', color: '#888' }],
    legend: 'right',
  });
  const texts = [...svg.matchAll(/<text[^>]*>([^<]*)<\/text>/g)].map((m) => m[1]);

  it('labels its axes at round ticks from 0 past the data', () => {
    expect(texts).toEqual(expect.arrayContaining(['0.0', '0.5', '1.0', '1.5', '2.0', '2.5', '3.0']));
    expect(texts).toEqual(expect.arrayContaining(['0.00', '0.05', '0.10', '0.15', '0.20', '0.25', '0.30']));
    // Neither labels nor coordinates carry float noise.
    expect(svg).not.toMatch(/\.\d{4,}/);
  });

  it('draws each series with its legend, the markers and the levels', () => {
    expect(svg.match(/<path /g)).toHaveLength(2);
    expect(texts).toEqual(expect.arrayContaining(['A', 'B', 'bound', 'quota 0.25/s', 'calls &lt;per> second']));
    // The level at 0.25 of an axis to 0.30: 5/6 of the way up the plot (y 352 to 40).
    expect(svg).toContain('<line x1="64" y1="92" x2="696" y2="92" stroke="#888" stroke-dasharray="6 4"/>');
  });
});
