// Found on the real API server too: a Node status write still in flight when stop() begins
// fails (the Node is not there) and armed its retry after stop() had cleared the timers.
// Found in review: Agent.stop() cancels the cooling timer, then stops the status writer,
// whose last write plans the status (planStatus -> clearCoolingWhenDone) and so arms the cooling
// timer again: after stop() a timer is left on the agent's clock whenever an address is cooling.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import { Agent } from '../../src/agent/agent.js';
import { silentLogger } from '../../src/observability/logger.js';
import { eventually } from '../helpers/ecs.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { kubeWithPool } from '../helpers/kube.js';

const IPS = Array.from({ length: 4 }, (_, i) => `192.168.16.${i + 1}`);
let close: (() => Promise<void>) | undefined;
afterAll(async () => close?.());

describe('Agent.stop()', () => {
  it('leaves no timer on its clock, though an address is cooling', async () => {
    const { emu, kc } = await kubeWithPool('node-1', { cidr: '192.168.16.0/20', gateway: '192.168.31.253', ips: IPS });
    close = () => emu.close();
    const clock = new FakeClock(Date.now());
    const agent = new Agent({
      kc,
      node: 'node-1',
      stateDir: mkdtempSync(join(tmpdir(), 'agent-')),
      cooldownMs: 60_000,
      statusIntervalMs: 1000,
      logger: silentLogger(),
      registry: new Registry(),
      clock,
    });
    await agent.start();
    await eventually(() => agent.ready);
    const lease = agent.allocate({ containerId: 'c1', ifName: 'eth0', pod: 'default/p1' });
    expect(lease).not.toBe('pool-empty');
    await agent.persisted();
    // Released: the address cools for a minute; the status write that says so is pending.
    expect(agent.release('c1', 'eth0')).toHaveLength(1);
    await agent.persisted();
    await agent.stop();
    expect(clock.pending).toBe(0);
  });
});
