import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Agent } from '../../src/agent/agent.js';
import { allReady, startAgentFor, testCluster, type TestCluster } from '../helpers/cluster.js';
import { eventually } from '../helpers/ecs.js';

let c: TestCluster;
let agent: Agent;
let node: string;

beforeAll(async () => {
  c = await testCluster();
  await c.addClass('small', {
    vSwitchTags: { role: 'pods' },
    securityGroupIDs: ['sg-demo-pods'],
    preAllocate: 4,
    releaseDelaySeconds: 600,
    // The pool holds exactly preAllocate free, so that the cooling addresses show: no growth batch on top.
    maxBatch: 0,
  });
  node = await c.addNode('i-demo-02'); // ecs.g7.xlarge: 3 secondary ENIs x 15 IPs
  await c.startOperator();
  await allReady(c, [node], 30_000);
  agent = await startAgentFor(c, node, { cooldownMs: 120_000, statusIntervalMs: 100 });
}, 60_000);
afterAll(async () => {
  await agent?.stop();
  await c?.close();
});

const start = (id: string) => agent.allocate({ containerId: id, ifName: 'eth0', pod: `default/${id}` });

describe('IPs cooling down after a release', () => {
  it('count as not free, so the operator keeps preAllocate IPs really free during churn', async () => {
    for (let i = 0; i < 4; i++) expect(start(`a${i}`)).not.toBe('pool-empty');
    // The operator tops the pool up to 4 free above the 4 in use.
    const filled = await eventually(async () => {
      const p = await c.pool(node);
      return p.status?.summary?.used === 4 && (p.status.summary.available ?? 0) - 4 >= 4 ? p : undefined;
    }, 20_000);
    const before = filled.status!.summary!.available!;
    // Four pods stop and four new ones start at once: the stopped pods' IPs cool down for two minutes.
    for (let i = 0; i < 4; i++) agent.release(`a${i}`, 'eth0');
    for (let i = 0; i < 4; i++) expect(start(`b${i}`)).not.toBe('pool-empty');
    const p = await eventually(async () => {
      const pool = await c.pool(node);
      return Object.keys(pool.status?.cooling ?? {}).length === 4 &&
        (pool.status?.summary?.available ?? 0) >= before + 4
        ? pool
        : undefined;
    }, 20_000);
    expect(Object.values(p.status!.cooling!).every((t) => Date.parse(t) > Date.now() + 60_000)).toBe(true);
    // So the next burst of four finds free addresses, though none of the cooling ones is handed out.
    const cooling = new Set(Object.keys(p.status!.cooling!));
    for (let i = 0; i < 4; i++) {
      const lease = await eventually(() => {
        const l = start(`c${i}`);
        return l === 'pool-empty' ? undefined : l;
      }, 10_000);
      expect(cooling.has(lease.ip)).toBe(false);
    }
  }, 60_000);
});
