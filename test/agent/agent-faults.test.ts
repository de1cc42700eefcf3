/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from '@jest/globals';
import { CoreV1Api, Watch } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { Agent, type AgentOptions } from '../../src/agent/agent.js';
import { serveAgentApi } from '../../src/agent/api.js';
import { agentRequest } from '../../src/agent/client.js';
import { FS_JOURNAL_OPS } from '../../src/agent/state-file.js';
import type { ENIPool } from '../../src/api/types.js';
import { createLogger } from '../../src/observability/logger.js';
import type { KubeFaultRule } from '../../testbed/control-plane/index.js';
import { eventually, sleep } from '../helpers/ecs.js';
import { kubeWithPool } from '../helpers/kube.js';

const NODE = 'node-3';
const IPS = Array.from({ length: 20 }, (_, i) => `10.3.0.${i + 10}`);
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

/** An agent on its own emulator, its log lines kept; `dir` reuses a state folder. */
async function agentWith(o: Partial<AgentOptions> = {}, dir = mkdtempSync(join(tmpdir(), 'agent-faults-'))) {
  const k = await kubeWithPool(NODE, { cidr: '10.3.0.0/24', gateway: '10.3.0.253', ips: IPS });
  const lines: Array<Record<string, any>> = [];
  const logger = createLogger({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s)) });
  const registry = new Registry();
  const agent = new Agent({
    kc: k.kc,
    node: NODE,
    stateDir: dir,
    cooldownMs: 100,
    statusIntervalMs: 100,
    logger,
    registry,
    ...o,
  });
  await agent.start();
  const socket = join(dir, 'agent.sock');
  const server = await serveAgentApi(agent, socket);
  await eventually(() => agent.ready);
  // The pool as the API server has it, each write seen (a watch), read without waiting.
  let latest: ENIPool | undefined;
  /** Every version of the pool the watch delivered, in order (none is missed between two looks). */
  const versions: ENIPool[] = [];
  const watching = await new Watch(k.kc).watch(
    '/apis/eniipam.io/v1alpha1/enipools',
    { fieldSelector: `metadata.name=${NODE}` },
    (_type, obj) => versions.push((latest = obj as ENIPool)),
    () => undefined,
  );
  await eventually(() => latest !== undefined);
  const close = async () => {
    watching.abort();
    server.close();
    await agent.stop();
    await k.emu.close();
  };
  closers.push(close);
  const pool = () => latest!;
  const allocate = async (containerId: string) => {
    const r = await agentRequest(socket, 'POST', '/v1/allocate', {
      containerId,
      ifName: 'eth0',
      pod: `d/${containerId}`,
    });
    return { status: r.status, body: JSON.parse(r.text) };
  };
  const metric = async (name: string, labels: Record<string, string> = {}) =>
    (await registry.getSingleMetric(name)!.get()).values.find((v) =>
      Object.entries(labels).every(([k, l]) => v.labels[k] === l),
    )?.value ?? 0;
  return { ...k, agent, dir, socket, lines, pool, versions, allocate, metric, close };
}

const statusPatches: KubeFaultRule = { verbs: ['patch'], resource: 'enipools/status', action: 'respond' };

/** Every time the rule's hit count grows, polled every few ms: when the refused writes came. */
function hitTimes(a: { emu: { faultRules(): Array<{ hits: number }> } }) {
  const times: number[] = [];
  let seen = 0;
  const timer = setInterval(() => {
    const hits = a.emu.faultRules()[0]?.hits ?? 0;
    for (; seen < hits; seen++) times.push(Date.now());
  }, 5);
  return { times, stop: () => clearInterval(timer) };
}

const usedIps = (p: ENIPool) => Object.keys(p.status?.used ?? {}).sort();

describe('the agent’s status writes under a refusing API server', () => {
  it('back off, honour Retry-After, and catch up once the server takes them again', async () => {
    const a = await agentWith();
    await eventually(() => a.pool().status?.agentConditions?.[0]?.status === 'True');
    a.emu.setFaultRules([{ ...statusPatches, code: 429, retryAfterSeconds: 1, durationMs: 3000 }]);
    const hits = hitTimes(a);
    const t0 = Date.now();
    const ips: string[] = [];
    for (let i = 0; i < 6; i++) {
      ips.push((await a.allocate(`c${i}`)).body.lease.ip);
      await sleep(400);
    }
    await eventually(() => Date.now() - t0 > 3000, 5000);
    hits.stop();
    // Every 100 ms without back-off (about 30 in the 3 s); with Retry-After: 1, at most one a second.
    expect(hits.times.length).toBeGreaterThanOrEqual(2);
    expect(hits.times.length).toBeLessThanOrEqual(4);
    for (let i = 1; i < hits.times.length; i++)
      expect(hits.times[i]! - hits.times[i - 1]!).toBeGreaterThanOrEqual(1000 - 20);
    expect(await a.metric('eni_ipam_agent_status_write_failures_total', { reason: 'throttled' })).toBe(
      hits.times.length,
    );
    // Every change made meanwhile goes in the next write taken.
    await eventually(() => JSON.stringify(usedIps(a.pool())) === JSON.stringify([...ips].sort()), 5000);
    // (The server holds the write a moment before its answer reaches the agent.)
    await eventually(async () => (await a.metric('eni_ipam_agent_status_backoff_seconds')) === 0);
    expect(await a.metric('eni_ipam_agent_status_unsent_seconds')).toBe(0);
  }, 20_000);

  it('say so under a 403: one log line per reason, a Warning Event once stale, the condition once written again', async () => {
    const a = await agentWith({ random: () => 1, statusBackoffMaxMs: 400, statusStaleAfterMs: 1000 });
    await eventually(() => a.pool().status?.agentConditions?.[0]?.status === 'True');
    a.emu.setFaultRules([{ ...statusPatches, code: 403, user: 'system:serviceaccount:kube-system:eni-ipam-agent' }]);
    const hits = hitTimes(a);
    const ip = (await a.allocate('c1')).body.lease.ip;
    await sleep(2500);
    hits.stop();
    // Retries at 0.1, 0.2, 0.4 s apart, then at the 0.4 s cap: 8 in 2.5 s, not 25 (one per interval).
    expect(hits.times.length).toBeGreaterThanOrEqual(6);
    expect(hits.times.length).toBeLessThanOrEqual(10);
    expect(
      await a.metric('eni_ipam_agent_status_write_failures_total', { reason: 'forbidden' }),
    ).toBeGreaterThanOrEqual(hits.times.length);
    expect(await a.metric('eni_ipam_agent_status_unsent_seconds')).toBeGreaterThan(1.5);
    const refusals = a.lines.filter((l) => l.msg === 'could not write the pool status; retrying with back-off');
    expect(refusals).toHaveLength(1);
    expect(refusals[0]).toMatchObject({
      node: NODE,
      reason: 'forbidden',
      code: 403,
      err: expect.stringContaining('cannot patch resource "enipools/status"'),
    });
    // Events are another resource: they get through.
    const core = a.kc.makeApiClient(CoreV1Api);
    const events = async (reason: string) =>
      (await core.listNamespacedEvent({ namespace: 'default' })).items.filter((e) => e.reason === reason);
    const stale = await eventually(async () => (await events('StatusNotReported'))[0]);
    expect(stale).toMatchObject({ type: 'Warning', involvedObject: { kind: 'ENIPool', name: NODE } });
    expect(stale.message).toMatch(
      /^the agent could not write this pool's status \(used, releaseAcks, cooling\) for 1\.\d s: 403 Forbidden: .* retries with back-off up to 0\.4 s$/,
    );
    expect(usedIps(a.pool())).toEqual([]);
    a.emu.clearFaultRules();
    await eventually(() => JSON.stringify(usedIps(a.pool())) === JSON.stringify([ip]), 3000);
    const condition = a.pool().status!.agentConditions!.find((c) => c.type === 'StatusReported')!;
    expect(condition).toMatchObject({ status: 'True', reason: 'Reported' });
    expect(condition.message).toMatch(
      /^the agent's status is current again after \d+\.\d s unsent \(\d+ writes refused; last: 403 Forbidden: /,
    );
    expect((await eventually(async () => (await events('StatusReported'))[0])).type).toBe('Normal');
    expect(a.lines.some((l) => l.msg === 'the pool status is written again' && l.failures >= 6)).toBe(true);
  }, 20_000);

  it('write the condition False once stale, when the server takes a small write but not the full one', async () => {
    // Four writes refused (409), then the server takes writes again: the condition's own write,
    // made once the status is 0.9 s stale, lands before the next full write (at 1.5 s) makes it current.
    const a = await agentWith({ random: () => 1, statusBackoffMaxMs: 5000, statusStaleAfterMs: 900 });
    await eventually(() => a.pool().status?.agentConditions?.[0]?.status === 'True');
    a.emu.setFaultRules([{ ...statusPatches, code: 409, times: 4 }]);
    const from = a.versions.length - 1;
    const ip = (await a.allocate('c1')).body.lease.ip;
    await eventually(() => JSON.stringify(usedIps(a.pool())) === JSON.stringify([ip]), 5000);
    // The condition through every version the API server held since, in order.
    const seen: string[] = [];
    for (const p of a.versions.slice(from)) {
      const c = p.status?.agentConditions?.find((x) => x.type === 'StatusReported');
      const now = `${c?.status}/${c?.reason}`;
      if (seen.at(-1) !== now) seen.push(now);
    }
    expect(seen).toEqual(['True/Reported', 'False/Conflict', 'True/Reported']);
  }, 20_000);
});

describe('the agent’s status writes to a server that does not answer', () => {
  it('give a write up after the timeout and retry it, rather than wait on it for ever', async () => {
    const a = await agentWith({ statusWriteTimeoutMs: 300, statusBackoffMaxMs: 400 });
    await eventually(() => a.pool().status?.agentConditions?.[0]?.status === 'True');
    a.emu.setFaultRules([{ ...statusPatches, action: 'hang', durationMs: 4000 }]);
    const ip = (await a.allocate('c1')).body.lease.ip;
    await sleep(1500);
    // Still held by the server: without a deadline no write would have ended yet.
    expect(a.emu.faultRules()[0]!.active).toBe(true);
    expect(
      await a.metric('eni_ipam_agent_status_write_failures_total', { reason: 'unreachable' }),
    ).toBeGreaterThanOrEqual(2);
    expect(a.lines.find((l) => l.reason === 'unreachable')?.err).toBe(
      'the API server did not answer the status write within 300 ms',
    );
    await eventually(() => JSON.stringify(usedIps(a.pool())) === JSON.stringify([ip]), 8000);
  }, 20_000);
});

describe('the agent’s answers after a failed fdatasync', () => {
  it('refuses the change it could not save, answers its retry once saved, and keeps it across a restart', async () => {
    let failSync = 0;
    const journalOps = {
      fdatasync: async (fd: number) => {
        if (failSync && failSync--) throw Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' });
        return FS_JOURNAL_OPS.fdatasync(fd);
      },
    };
    const a = await agentWith({ journalOps });
    const first = await a.allocate('c1');
    expect(first.status).toBe(200);
    failSync = 1;
    const refused = await a.allocate('c2');
    expect(refused).toMatchObject({ status: 500, body: { message: expect.stringContaining('EIO') } });
    // The runtime retries the ADD: the same address, answered once it is on disk.
    const retried = await a.allocate('c2');
    expect(retried.status).toBe(200);
    const ip = retried.body.lease.ip;
    await a.close();
    closers.splice(closers.indexOf(a.close), 1);
    const b = await agentWith({}, a.dir);
    expect(
      b.agent
        .list()
        .map((x) => `${x.containerId}=${x.ip}`)
        .sort(),
    ).toEqual([`c1=${first.body.lease.ip}`, `c2=${ip}`]);
  }, 20_000);
});
