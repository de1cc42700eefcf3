import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { bucketCalls, callsChart, perSecond } from '../../bench/calls.js';
import { renderChart } from '../../bench/svg.js';

const T0 = 1_700_000_000_000;
const call = (s: number, action: string, code = 'OK') => ({ at: T0 + s * 1000, action, code });
const QUOTAS = perSecond(
  { CreateNetworkInterface: 500, AttachNetworkInterface: 500, AssignPrivateIpAddresses: 400 },
  5,
);

describe('mutating calls over time', () => {
  it('counts each action’s successful calls per second, and only those', () => {
    const journal = [
      call(0.1, 'CreateNetworkInterface'),
      call(0.9, 'CreateNetworkInterface'),
      call(0.95, 'DescribeNetworkInterfaces'),
      call(1.2, 'CreateNetworkInterface', 'Throttling.User'),
      call(1.5, 'AttachNetworkInterface'),
      call(3.99, 'CreateNetworkInterface'),
    ];
    const c = bucketCalls(journal, {
      t0: T0,
      endMs: 4000,
      actions: ['CreateNetworkInterface', 'AttachNetworkInterface', 'DeleteNetworkInterface'],
      quotaPerSecond: QUOTAS,
    });
    expect(c).toEqual({
      intervalSeconds: 1,
      byAction: { CreateNetworkInterface: [2, 0, 0, 1], AttachNetworkInterface: [0, 1, 0, 0] },
      // 500 a minute on a clock 5 times faster.
      quotaPerSecond: { CreateNetworkInterface: 500 / 12, AttachNetworkInterface: 500 / 12 },
    });
  });

  it('widens the buckets on a long run, keeps every call, and ends after the last', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ s: fc.double({ min: 0, max: 3000, noNaN: true }), a: fc.constantFrom('A', 'B') })),
        fc.nat(3000),
        (calls, endS) => {
          const c = bucketCalls(
            calls.map((x) => call(x.s, x.a)),
            { t0: T0, endMs: endS * 1000, actions: ['A', 'B'], quotaPerSecond: {} },
          );
          const counts = Object.values(c.byAction);
          for (const a of ['A', 'B'] as const)
            expect(c.byAction[a]?.reduce((n, k) => n + k, 0) ?? 0).toBe(calls.filter((x) => x.a === a).length);
          const span = Math.max(endS, ...calls.map((x) => x.s));
          for (const k of counts) {
            expect(k.length).toBeLessThanOrEqual(60);
            expect(k.length * c.intervalSeconds).toBeGreaterThanOrEqual(span);
          }
          // The narrowest width that keeps to 60 buckets.
          const widths = [1, 2, 5, 10, 15, 30, 60];
          expect(widths).toContain(c.intervalSeconds);
          const narrower = widths[widths.indexOf(c.intervalSeconds) - 1];
          if (narrower) expect(span / narrower).toBeGreaterThan(60);
        },
      ),
    );
  });

  it('draws one line per action and one quota line for actions that share a quota', () => {
    const journal = [
      ...Array.from({ length: 50 }, (_, i) => call(i / 100, 'CreateNetworkInterface')),
      ...Array.from({ length: 50 }, (_, i) => call(0.5 + i / 100, 'AttachNetworkInterface')),
      ...Array.from({ length: 40 }, (_, i) => call(1 + i / 40, 'CreateNetworkInterface')),
      call(1.5, 'AssignPrivateIpAddresses'),
    ];
    const c = bucketCalls(journal, {
      t0: T0,
      actions: ['CreateNetworkInterface', 'AttachNetworkInterface', 'AssignPrivateIpAddresses'],
      quotaPerSecond: QUOTAS,
    });
    const chart = callsChart('scale-up calls', 'seconds', c);
    expect(chart.series.map((s) => [s.label, s.points])).toEqual([
      [
        'CreateNetworkInterface',
        [
          [0, 50],
          [1, 40],
          [2, 40],
        ],
      ],
      [
        'AttachNetworkInterface',
        [
          [0, 50],
          [1, 0],
          [2, 0],
        ],
      ],
      [
        'AssignPrivateIpAddresses',
        [
          [0, 0],
          [1, 1],
          [2, 1],
        ],
      ],
    ]);
    expect(chart.levels?.map((l) => l.label)).toEqual([
      'quota 41.7/s: CreateNetworkInterface, AttachNetworkInterface',
      'quota 33.3/s: AssignPrivateIpAddresses',
    ]);
    const svg = renderChart(chart);
    expect(svg.match(/<path /g)).toHaveLength(3);
    expect(svg).toContain('>quota 41.7/s: CreateNetworkInterface, AttachNetworkInterface</text>');
    expect(svg).toContain('>successful calls per second (1 s buckets)</text>');
  });
});
