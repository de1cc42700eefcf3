/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { readFileSync } from 'node:fs';

import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';

import { Agent } from '../../src/agent/agent.js';

import { agentClient } from '../../src/agent/client.js';
import { GC_GRACE_MS, SUPPORTED_VERSIONS, answerCni, type CniAgent } from '../../src/agent/cni.js';
import { StateFile } from '../../src/agent/state-file.js';

import { agentOnSocket } from '../helpers/kube.js';
import { cniVars, ipamConf } from '../helpers/cni-call.js';

/*
 * The CNI protocol, as the agent answers it on POST /v1/cni: exactly what eni-ipam-cni prints
 * and the code it exits with (test/cni/plugin.test.ts runs the same calls through the binary).
 */
const IPS = Array.from({ length: 210 }, (_, i) => `10.2.${Math.floor(i / 250)}.${(i % 250) + 1}`);
let agent: Agent;
let socket: string;
let dir: string;

/** A CNI call as the plugin forwards it: the runtime's CNI_* variables and the network configuration. */
async function cni(
  command: string,
  container: string,
  conf: Record<string, unknown> | string = {},
  env: Record<string, string> = {},
): Promise<{ code: number; out: any; stdout: string }> {
  const stdin = typeof conf === 'string' ? conf : ipamConf(socket, conf);
  const vars = { ...cniVars(command, container), ...env };
  const a = await agentClient.cni(socket, {
    env: Object.fromEntries(Object.entries(vars).filter(([, v]) => v !== '')),
    stdin,
  });
  return { code: a.exitCode, stdout: a.stdout, out: a.stdout.trim() ? JSON.parse(a.stdout) : undefined };
}

let close: () => Promise<void>;

beforeAll(async () => {
  ({ agent, dir, socket, close } = await agentOnSocket(
    'n',
    { cidr: '10.2.0.0/22', gateway: '10.2.3.253', ips: IPS, mac: '00:16:3e:00:00:0a' },
    {
      cooldownMs: 300,
      tmpPrefix: 'cni-',
    },
  ));
});
afterAll(() => close?.());

describe('the CNI protocol on POST /v1/cni', () => {
  it('answers ADD with the address, prefix, gateway, default route and the ENI, and the same again', async () => {
    const add = await cni('ADD', 'pod-a');
    expect(add.code).toBe(0);
    expect(add.stdout.endsWith('}\n')).toBe(true);
    expect(add.out).toEqual({
      cniVersion: '1.0.0',
      ips: [{ address: `${IPS[0]}/22`, gateway: '10.2.3.253' }],
      routes: [{ dst: '0.0.0.0/0', gw: '10.2.3.253' }],
      dns: {},
      eniIpam: { eniId: 'eni-a', mac: '00:16:3e:00:00:0a', vSwitchCidr: '10.2.0.0/22' },
    });
    expect(agent.list().find((a) => a.containerId === 'pod-a')).toMatchObject({
      pod: 'default/pod-a',
      network: 'pods',
    });
    expect((await cni('ADD', 'pod-a')).out.ips).toEqual(add.out.ips);
    expect(await cni('CHECK', 'pod-a', { prevResult: add.out })).toEqual({ code: 0, stdout: '', out: undefined });
    expect(await cni('CHECK', 'pod-a', { prevResult: { ips: [{ address: '10.9.9.9/22' }] } })).toMatchObject({
      code: 1,
      out: { code: 5, msg: expect.stringContaining('its previous result says 10.9.9.9/22') },
    });
    expect(await cni('DEL', 'pod-a')).toEqual({ code: 0, stdout: '', out: undefined });
    expect((await cni('DEL', 'pod-a')).code).toBe(0);
    expect((await cni('DEL', 'never-seen', {}, { CNI_NETNS: '' })).code).toBe(0);
    expect(await cni('CHECK', 'pod-a')).toMatchObject({ code: 1, out: { code: 3 } });
  });

  it('answers in the configuration’s version: results before 1.0.0 carry the IP version', async () => {
    const add = await cni('ADD', 'pod-old', { cniVersion: '0.4.0' });
    expect(add.out).toMatchObject({
      cniVersion: '0.4.0',
      ips: [{ version: '4', address: expect.stringMatching(/\/22$/) }],
    });
    expect((await cni('DEL', 'pod-old', { cniVersion: '0.4.0' })).code).toBe(0);
  });

  it('says try again later (11) when the pool is empty', async () => {
    const names: string[] = [];
    for (
      let i = 0;
      agent.allocate({ containerId: `fill-${i}`, ifName: 'eth0', pod: `default/fill-${i}` }) !== 'pool-empty';
      i++
    )
      names.push(`fill-${i}`);
    const r = await cni('ADD', 'one-too-many');
    expect(r).toMatchObject({
      code: 1,
      // The message quotes the pool's own reason, so the runtime's FailedCreatePodSandBox Event names it.
      out: {
        cniVersion: '1.0.0',
        code: 11,
        msg: expect.stringMatching(/^no free pod IP on this node yet: (all \d+ pod IPs of the pool|the pool is )/),
      },
    });
    for (const n of names) agent.release(n, 'eth0');
    await new Promise((r) => setTimeout(r, 400)); // the cool-down (300 ms) of the released ones
  });

  it('names what is wrong with its input, with the spec’s codes', async () => {
    expect(await cni('ADD', 'x', '{not json')).toMatchObject({
      code: 1,
      out: { cniVersion: '1.0.0', code: 6, msg: 'the network configuration on stdin is not valid JSON' },
    });
    expect(await cni('ADD', 'x', '[1]')).toMatchObject({ code: 1, out: { code: 6 } });
    expect(await cni('ADD', 'x', { cniVersion: '9.9.9' })).toMatchObject({
      code: 1,
      out: { cniVersion: '1.0.0', code: 1, msg: expect.stringContaining('cniVersion 9.9.9 is not supported') },
    });
    expect(await cni('ADD', 'x', JSON.stringify({ name: 'pods' }))).toMatchObject({
      code: 1,
      out: { code: 7, msg: 'the network configuration has no cniVersion' },
    });
    expect(await cni('ADD', 'x', { ipam: { type: 'eni-ipam-cni', socket: 7 } })).toMatchObject({
      code: 1,
      out: { code: 7, msg: expect.stringContaining('ipam.socket must be the path') },
    });
    expect(await cni('ADD', 'x', { ipam: { type: 'eni-ipam-cni', timeoutSeconds: -1 } })).toMatchObject({
      code: 1,
      out: { code: 7, msg: expect.stringContaining('ipam.timeoutSeconds must be a number') },
    });
    expect(await cni('ADD', '', {}, { CNI_CONTAINERID: '' })).toMatchObject({
      code: 1,
      out: { code: 4, msg: expect.stringContaining('CNI_CONTAINERID is not set') },
    });
    expect(await cni('ADD', 'x', {}, { CNI_NETNS: '' })).toMatchObject({
      code: 1,
      out: { code: 4, msg: expect.stringContaining('CNI_NETNS is not set') },
    });
    expect(await cni('ADD', 'x', {}, { CNI_COMMAND: '' })).toMatchObject({
      code: 1,
      out: { code: 4, msg: expect.stringContaining('CNI_COMMAND is not set') },
    });
    expect(await cni('FROB', 'x')).toMatchObject({
      code: 1,
      out: { code: 4, msg: expect.stringContaining('CNI_COMMAND FROB is not one of') },
    });
    // A configuration without ipam.socket is fine: the plugin went to the default socket.
    expect(
      (
        await cni(
          'ADD',
          'no-socket',
          JSON.stringify({ cniVersion: '1.1.0', name: 'pods', ipam: { type: 'eni-ipam-cni' } }),
        )
      ).out.cniVersion,
    ).toBe('1.1.0');
    expect((await cni('DEL', 'no-socket')).code).toBe(0);
  });

  it('refuses a command the configuration’s version does not have (1)', async () => {
    const noIds = { CNI_CONTAINERID: '', CNI_IFNAME: '', CNI_NETNS: '' };
    expect(await cni('STATUS', 'x', {}, noIds)).toMatchObject({
      code: 1,
      out: { cniVersion: '1.0.0', code: 1, msg: 'cniVersion 1.0.0 has no STATUS; it came with 1.1.0' },
    });
    expect(await cni('GC', 'x', { cniVersion: '1.0.0', 'cni.dev/valid-attachments': [] }, noIds)).toMatchObject({
      code: 1,
      out: { code: 1, msg: 'cniVersion 1.0.0 has no GC; it came with 1.1.0' },
    });
    expect(await cni('CHECK', 'x', { cniVersion: '0.3.1' })).toMatchObject({
      code: 1,
      out: { cniVersion: '0.3.1', code: 1, msg: 'cniVersion 0.3.1 has no CHECK; it came with 0.4.0' },
    });
  });

  it('answers VERSION and STATUS', async () => {
    expect((await cni('VERSION', 'x', '{}')).out).toEqual({
      cniVersion: '1.0.0',
      supportedVersions: SUPPORTED_VERSIONS,
    });
    expect(
      await cni('STATUS', 'x', { cniVersion: '1.1.0' }, { CNI_CONTAINERID: '', CNI_IFNAME: '', CNI_NETNS: '' }),
    ).toEqual({ code: 0, stdout: '', out: undefined });
  });

  it('GC releases this network’s allocations the runtime no longer lists, past the grace period only', async () => {
    for (const id of ['gc-keep', 'gc-stale', 'gc-young']) expect((await cni('ADD', id)).code).toBe(0);
    expect((await cni('ADD', 'gc-other-net', { name: 'other' })).code).toBe(0);
    agent.allocate({ containerId: 'gc-direct', ifName: 'eth0', pod: 'default/gc-direct' });
    const valid = [{ containerID: 'gc-keep', ifname: 'eth0' }];
    const gcEnv = { CNI_CONTAINERID: '', CNI_IFNAME: '', CNI_NETNS: '' };
    // Within the grace period nothing goes: an ADD may finish after the runtime listed its attachments.
    expect(await cni('GC', '', { cniVersion: '1.1.0', 'cni.dev/valid-attachments': valid }, gcEnv)).toEqual({
      code: 0,
      stdout: '',
      out: undefined,
    });
    expect(agent.list().map((a) => a.containerId)).toEqual(
      expect.arrayContaining(['gc-keep', 'gc-stale', 'gc-young', 'gc-other-net', 'gc-direct']),
    );
    // Past it (the stale one made older), only this network's unlisted allocation goes.
    const stale = agent.list().find((a) => a.containerId === 'gc-stale')!;
    const young = agent.list().find((a) => a.containerId === 'gc-young')!;
    const at = stale.allocatedAt + GC_GRACE_MS + 1;
    const stdin = JSON.stringify({
      cniVersion: '1.1.0',
      name: 'pods',
      ipam: { type: 'eni-ipam-cni', socket },
      'cni.dev/valid-attachments': valid,
    });
    const shifted: CniAgent = {
      ready: true,
      list: () => agent.list().map((a) => (a === young ? { ...a, allocatedAt: at } : a)),
      removePod: (c, i) => agent.removePod(c, i),
      addPod: (r) => agent.addPod(r),
      whyEmpty: () => agent.whyEmpty(),
      now: () => at,
    };
    expect(await answerCni(shifted, { env: { CNI_COMMAND: 'GC', CNI_PATH: '/opt/cni/bin' }, stdin })).toEqual({
      stdout: '',
      exitCode: 0,
    });
    expect(
      agent
        .list()
        .map((a) => a.containerId)
        .sort(),
    ).toEqual(['gc-direct', 'gc-keep', 'gc-other-net', 'gc-young']);
    // Without the list GC refuses, rather than release everything.
    expect(await cni('GC', '', { cniVersion: '1.1.0' }, gcEnv)).toMatchObject({
      code: 1,
      out: { code: 7, msg: expect.stringContaining('GC needs cni.dev/valid-attachments') },
    });
    for (const id of ['gc-keep', 'gc-young', 'gc-other-net', 'gc-direct']) agent.release(id, 'eth0');
  });

  it('answers a change only once it is on disk, and saves the changes made meanwhile together', async () => {
    const journal = StateFile.in(dir).journalPath;
    const lines = () => readFileSync(journal, 'utf8').split('\n').filter(Boolean);
    const last = () =>
      Object.values(JSON.parse(lines().at(-1)!).allocations as Record<string, { containerId: string }>).map(
        (a) => a.containerId,
      );
    // Through the endpoint: at the moment of the answer, the journal holds the allocation.
    const answered = await Promise.all(
      ['durable-1', 'durable-2', 'durable-3'].map(async (id) =>
        (await cni('ADD', id)).code === 0 ? last().includes(id) : false,
      ),
    );
    expect(answered).toEqual([true, true, true]);
    // A burst (the requests read in one poll): the first change is written at once, the others wait for it and go together.
    const before = lines().length;
    const ids = Array.from({ length: 40 }, (_, i) => `burst-${i}`);
    for (const id of ids)
      expect(agent.allocate({ containerId: id, ifName: 'eth0', pod: `default/${id}`, network: 'pods' })).not.toBe(
        'pool-empty',
      );
    await agent.persisted();
    expect(lines().length - before).toBeGreaterThanOrEqual(1);
    expect(lines().length - before).toBeLessThanOrEqual(2);
    expect(last()).toEqual(expect.arrayContaining(ids));
    for (const id of [...ids, 'durable-1', 'durable-2', 'durable-3']) agent.release(id, 'eth0');
    await agent.persisted();
    expect(last()).not.toContain('burst-0');
  });
});
