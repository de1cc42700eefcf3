/**
 * Found in review (it failed before the fix): an interval longer than 24.8 days
 * (`--gc-interval`, `--resync-interval`, the chart's `gcIntervalSeconds`/`resyncIntervalSeconds`,
 * which have a minimum and no maximum) turns into a loop that runs every millisecond.
 *
 * Node's timers take at most 2^31-1 ms; a longer delay is set to 1 ms (with a
 * TimeoutOverflowWarning). operator.ts arms `setInterval(gc, gcIntervalMs)` and
 * `setTimeout(resyncAndReschedule, resyncIntervalMs)` with the flag's value as it is, and the
 * flags are only checked to be positive (cli/operator.ts), so "GC once a month" (2592000 s) runs a
 * full ENI resync plus GC every millisecond, and "resync once a month" a full resync back to back:
 * the account's DescribeNetworkInterfaces quota goes to it. Either the flags are refused (exit 2) or
 * the intervals hold; today neither.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import { testCluster, type TestCluster } from '../helpers/cluster.js';
import { sleep } from '../helpers/ecs.js';

const MONTH_MS = 30 * 24 * 3600 * 1000;
let c: TestCluster;
afterEach(() => c?.close());

describe('a month-long GC or resync interval', () => {
  it.each([
    ['gcIntervalMs', { gcIntervalMs: MONTH_MS }],
    ['resyncIntervalMs', { resyncIntervalMs: MONTH_MS }],
  ] as const)(
    '%s of 30 days: one full resync at start, none more within 3 s',
    async (_name, config) => {
      c = await testCluster();
      const op = await c.startOperator({ config });
      const t0 = Date.now();
      await sleep(3000);
      expect(op.isLeader).toBe(true);
      const listings = c.ecs.calls({ since: t0 - 5000, action: 'DescribeNetworkInterfaces' }).length;
      // Before the fix: hundreds of listings (a gc() or a resync per millisecond, held only by the limiter).
      expect(listings).toBeLessThanOrEqual(2);
    },
    30_000,
  );
});
