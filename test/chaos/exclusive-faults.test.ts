import { describe, expect, it } from '@jest/globals';
import { runSeries } from '../../chaos/scenario.js';
import { SCENARIOS } from '../../chaos/scenarios.js';
import { failuresOf } from '../helpers/faults.js';
import { cniPluginsUnavailable } from '../../testbed/cluster/runtime/node-image.js';
import { vpcUnavailable } from '../../testbed/vpc/index.js';

// The fault suite's exclusive-ENI scenario, short: real pods through the Exclusive conflist on the
// strict VPC, the agent SIGKILLed in the middle of every ADD and DEL.
const why = vpcUnavailable() ?? cniPluginsUnavailable();
if (why) console.warn(`exclusive fault scenario skipped: ${why}`);
const maybe = why ? describe.skip : describe;

maybe('fault suite, exclusive ENIs, short (root)', () => {
  it('an agent killed mid ADD and mid DEL: every pod gets a whole ENI of its own, and every device comes home', async () => {
    const scenario = SCENARIOS.find((s) => s.name === 'agent-killed-mid-exclusive')!;
    const [r] = await runSeries([scenario], { quick: true, faultMs: 20_000, warmMs: 0 });
    expect(failuresOf(r)).toEqual([]);
    // The kills landed in both calls, on real pods.
    expect(r!.verdicts['kills-landed']!.detail).toMatch(/^[1-9]\d* ADDs and [1-9]\d* DELs were cut/);
    expect(r!.verdicts['exclusive-pods-work']!.detail).toMatch(/^\d+ pods, each a whole ENI/);
  }, 240_000);
});
