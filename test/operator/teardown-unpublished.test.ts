/**
 * Found in review (it failed before the fix): a pool deleted on a live node never
 * lets go when one of its published ENIs holds an address its last status did not list.
 *
 * The teardown asks the agent about every address the cloud holds on an attached ENI
 * (node-departure.ts confirmRelease: `addresses(e)` from the cloud view). The agent answers
 * `do-not-release` for any address that is not on an InUse ENI of its pool as published
 * (allocator.ts agentStatus: `!own.has(ip)`), and a pool being deleted never publishes again.
 * So an address assigned after the last status (an assign whose status write lost the 409 race
 * with the deletion, or one a resync found) keeps its ENI, and the finalizer, forever: every 5 s
 * an ENIsInUse Event, `kubectl delete enipool` never returns. The agent never handed that address
 * out (it hands out only published ones), exactly as for a whole unpublished ENI, which the
 * teardown already deletes without an answer.
 */
import { describe, expect, it } from '@jest/globals';
import type { ENIPool, ENIPoolStatus } from '../../src/api/types.js';
import { agentStatus, emptyState } from '../../src/agent/allocator.js';
import { FINALIZER } from '../../src/operator/config.js';
import { NODE, eni, fixture, ipsOf } from './fakes.js';

const DELETING = { deletionTimestamp: '2026-03-01T11:59:00Z' };

/** An ENI as the operator publishes it (the agent reads vSwitchCIDR to hand its addresses out). */
const published = (e: ReturnType<typeof eni>, ips: string[]) => ({
  id: e.id,
  mac: e.mac,
  vSwitchID: e.vSwitchId,
  vSwitchCIDR: '10.0.0.0/16',
  gatewayIP: '10.0.0.253',
  primaryIP: e.primaryIp,
  state: 'InUse' as const,
  ips,
});

/** The agent's answer to what the live pool asks, merged into its status as the agent writes it (no pod holds anything). */
function agentAnswers(live: ENIPool): void {
  const mine = agentStatus(emptyState(), live, Date.parse('2026-03-01T12:00:00.000Z'));
  live.status = { ...(live.status ?? {}), releaseAcks: mine.releaseAcks, used: mine.used } as ENIPoolStatus;
  live.metadata.resourceVersion = String(Number(live.metadata.resourceVersion) + 1);
}

describe('teardown on a live node with an address assigned after the last status', () => {
  it('lets the pool go once the agent has confirmed every address it was ever given (no pod holds any)', async () => {
    // The cloud holds 5 addresses on eni-1; the pool's last status published 3 of them.
    const cloudEni = eni(1, 5);
    const f = fixture({
      metadata: DELETING,
      enis: [cloudEni],
      status: { enis: [published(cloudEni, ipsOf(cloudEni).slice(0, 3))] },
    });
    let deleted = false;
    let released = false;
    for (let round = 0; round < 6 && !released; round++) {
      f.sync(); // the cache catches up with the API server
      await f.reconcile();
      deleted ||= f.enis.calls.some((c) => c.action === 'deleteEni' && c.args[0] === 'eni-1');
      const live = f.store.live.get(NODE)!;
      released = !live.metadata.finalizers?.includes(FINALIZER);
      agentAnswers(live); // the agent answers every request it sees, as it would
    }
    // Before the fix: the agent answers do-not-release for 10.0.1.4 and 10.0.1.5 (never published to
    // it), so eni-1 is kept and the finalizer stays, round after round (ENIsInUse every 5 s).
    expect(deleted).toBe(true);
    expect(released).toBe(true);
  });
});
