import { describe, expect, it } from '@jest/globals';
import { runSeries } from '../../chaos/scenario.js';
import { SCENARIOS } from '../../chaos/scenarios.js';
import { failuresOf } from '../helpers/faults.js';

// The fault suite's prefix scenario, short: a class of /28 prefixes, pods coming and going, and
// lost answers and errors on the calls that create, assign and release prefixes.
describe('fault suite in Prefix mode, short', () => {
  it('keeps every invariant, whole prefixes included, through lost answers and errors', async () => {
    const scenario = SCENARIOS.find((s) => s.name === 'ecs-prefix-faults')!;
    const [r] = await runSeries([scenario], { quick: true, faultMs: 25_000, warmMs: 1500 });
    expect(failuresOf(r)).toEqual([]);
    // The checks ran on pods, and the calls under the fault were prefix calls.
    expect(r!.verdicts['no-release-in-use']!.detail).toMatch(/^\d+ polls$/);
    expect(r!.workload!.allocations).toBeGreaterThan(10);
    expect(r!.verdicts['prefixes-moved']!.detail).toMatch(/^[1-9]\d* assigns and [1-9]\d* unassigns of \/28 prefixes/);
  }, 150_000);
});
