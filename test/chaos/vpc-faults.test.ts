import { describe, expect, it } from '@jest/globals';
import { runSeries } from '../../chaos/scenario.js';
import { SCENARIOS } from '../../chaos/scenarios.js';
import { failuresOf } from '../helpers/faults.js';
import { cniPluginsUnavailable } from '../../testbed/cluster/runtime/node-image.js';
import { vpcUnavailable } from '../../testbed/vpc/index.js';

// The fault suite's VPC scenario, short: nodes in namespaces on the strict VPC, real pods through
// the shipped conflist, ENI devices that appear 4 s after their ENI is InUse during a scale-up.
const why = vpcUnavailable() ?? cniPluginsUnavailable();
if (why) console.warn(`VPC fault scenario skipped: ${why}`);
const maybe = why ? describe.skip : describe;

maybe('fault suite on the strict VPC, short (root)', () => {
  it('pods started while ENI devices appear late work at once, and each node ends with exactly its pods’ rules', async () => {
    const scenario = SCENARIOS.find((s) => s.name === 'vpc-devices-late')!;
    const [r] = await runSeries([scenario], { quick: true, faultMs: 15_000, warmMs: 1500 });
    expect(failuresOf(r)).toEqual([]);
    // The checks ran on real pods, and the late devices were in their path.
    expect(r!.verdicts['probes-reach-vpc']!.detail).toMatch(/^\d{2,} probe pods on 4 nodes/);
    expect(r!.verdicts['late-devices-waited']!.detail).toMatch(/waited \d+\.\d s, \d+\.\d s and worked$/);
  }, 150_000);
});
