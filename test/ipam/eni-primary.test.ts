/*
 * An ENI's own primary address is the node's (an image DHCPs it onto the hot-plugged device), so
 * the pool's addresses are the secondaries; but the primary is still an address of its vSwitch,
 * and one a pod may hold from before an upgrade. (Found by review.)
 */
import { describe, expect, it } from '@jest/globals';
import { planPool, type PoolObservation } from '../../src/ipam/pool-plan.js';
import { planRelease, type Ack } from '../../src/ipam/release.js';
import { observation } from './observation.js';

const NOW = Date.parse('2026-01-01T01:00:00.000Z');
const VSW = { id: 'vsw-a', zoneId: 'zone-a', vpcId: 'vpc-a', free: 100, tags: {}, blocked: false };

/** One pool on i-node (3 ENIs x 11 IPs: 2 secondary ENIs of 10 pod IPs), no ENI yet, the default sizing (8 free). */
function observe(vSwitches: PoolObservation['vSwitches']): PoolObservation {
  return observation({
    now: NOW,
    spec: { securityGroupIDs: ['sg-named'] },
    limits: { eniQuantity: 3, ipv4PerEni: 11 },
    vSwitches,
  });
}

/** Addresses a vSwitch gives for the plan: an assign its count, a create its secondaries and its own primary. */
const addressesTaken = (plan: ReturnType<typeof planPool>, vSwitchId: string) =>
  plan.assign.filter((a) => a.vSwitchId === vSwitchId).reduce((n, a) => n + a.count, 0) +
  plan.create.filter((c) => c.vSwitchId === vSwitchId).reduce((n, c) => n + c.ips + 1, 0);

describe('a new ENI takes its own primary address from the vSwitch', () => {
  it('a vSwitch with 3 free addresses gets a create it can hold: 2 secondaries and the ENI’s primary', () => {
    const plan = planPool(observe([{ ...VSW, free: 3 }]), { failures: [] });
    expect(plan.create).toHaveLength(1);
    // A create of 3 would need 4 addresses: ECS refuses it (InvalidVSwitchId.IpNotEnough), again after every refresh.
    expect(addressesTaken(plan, 'vsw-a')).toBeLessThanOrEqual(3);
    expect(plan.create[0]!.ips).toBe(2);
  });

  it('two creates in vSwitches of 5 and 4 free addresses each leave room for the ENI’s own primary', () => {
    // 8 wanted, two ENI slots: each create leaves its vSwitch room for its ENI's primary.
    const plan = planPool(
      observe([
        { ...VSW, id: 'vsw-a', free: 5 },
        { ...VSW, id: 'vsw-b', free: 4 },
      ]),
      { failures: [] },
    );
    expect(plan.create.length).toBeGreaterThan(0);
    expect(addressesTaken(plan, 'vsw-a')).toBeLessThanOrEqual(5);
    expect(addressesTaken(plan, 'vsw-b')).toBeLessThanOrEqual(4);
  });
});

const T1 = '2026-01-01T00:00:05.000Z';
const ready: Ack = { answer: 'ready', requestedAt: T1 };

describe('an ENI whose primary a pod holds (handed out before eni-ipam kept primaries for the node)', () => {
  it('is not deleted when its secondaries are confirmed free', () => {
    const plan = planRelease({
      enis: [{ id: 'eni-a', primaryIp: '10.0.0.1', secondaryIps: ['10.0.0.2', '10.0.0.3'] }],
      // The pod the previous release gave eni-a's primary: the agent reports it in status.used.
      used: new Set(['10.0.0.1']),
      excess: 2,
      now: 10_000,
      delayMs: 0,
      requests: new Map([
        ['10.0.0.2', T1],
        ['10.0.0.3', T1],
      ]),
      acks: new Map([
        ['10.0.0.2', ready],
        ['10.0.0.3', ready],
      ]),
      deleteEmptyEnis: true,
    });
    expect(plan.deleteEnis).toEqual([]);
    // Its free secondaries may still go, one by one.
    expect(plan.unassign).toEqual([{ eniId: 'eni-a', ips: ['10.0.0.2', '10.0.0.3'] }]);
  });
});
