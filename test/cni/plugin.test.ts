/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { execFile, spawnSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';

import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import fc from 'fast-check';

import { Agent } from '../../src/agent/agent.js';

import { agentClient } from '../../src/agent/client.js';
import { SUPPORTED_VERSIONS } from '../../src/agent/cni.js';

import { agentOnSocket } from '../helpers/kube.js';

/** The committed name, a link to the static binary `npm run build` writes (dist/bin/eni-ipam-cni). */
const PLUGIN = fileURLToPath(new URL('../../bin/eni-ipam-cni', import.meta.url));
const IPS = Array.from({ length: 20 }, (_, i) => `10.4.0.${i + 1}`);
let agent: Agent;
let dir: string;
let socket: string;

interface Run {
  code: number;
  out: any;
  stdout: string;
  ms: number;
}

/** Executes the plugin as a runtime does: only the CNI variables in its environment, the configuration on stdin. */
function plugin(env: Record<string, string>, stdin: string, bin = PLUGIN, args: string[] = []): Promise<Run> {
  const t0 = Date.now();
  return new Promise((resolve) => {
    const child = execFile(bin, args, { env, timeout: 30_000 }, (err, stdout) => {
      let out: any;
      try {
        out = stdout.trim() ? JSON.parse(stdout) : undefined;
      } catch {
        out = stdout;
      }
      resolve({ code: err ? Number((err as { code?: unknown }).code ?? -1) : 0, out, stdout, ms: Date.now() - t0 });
    });
    child.stdin!.on('error', () => undefined);
    child.stdin!.end(stdin);
  });
}

const conf = (extra: Record<string, unknown> = {}, ipam: Record<string, unknown> = { socket }) =>
  JSON.stringify({ cniVersion: '1.0.0', name: 'pods', type: 'ptp', ipam: { type: 'eni-ipam-cni', ...ipam }, ...extra });
const vars = (command: string, container = 'c', extra: Record<string, string> = {}) => ({
  CNI_COMMAND: command,
  CNI_CONTAINERID: container,
  CNI_NETNS: `/var/run/netns/${container}`,
  CNI_IFNAME: 'eth0',
  CNI_PATH: '/opt/cni/bin',
  CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=${container}`,
  ...extra,
});

let close: () => Promise<void>;

beforeAll(async () => {
  ({ agent, dir, socket, close } = await agentOnSocket(
    'n',
    { cidr: '10.4.0.0/24', gateway: '10.4.0.253', ips: IPS, mac: '00:16:3e:00:00:0b' },
    {
      cooldownMs: 100,
      tmpPrefix: 'plugin-',
    },
  ));
});
afterAll(() => close?.());

describe('eni-ipam-cni, the static binary', () => {
  it('is statically linked: ldd finds no shared library', () => {
    expect(statSync(PLUGIN).isFile()).toBe(true);
    const r = spawnSync('ldd', [PLUGIN], { encoding: 'utf8' });
    expect(`${r.stdout}${r.stderr}`).toMatch(/not a dynamic executable|statically linked/);
    expect(`${r.stdout}`).not.toMatch(/libc\.so/);
  });

  it('answers VERSION itself, with no agent and no configuration, as the agent would', async () => {
    const r = await plugin({ CNI_COMMAND: 'VERSION' }, '');
    expect(r).toMatchObject({ code: 0, out: { cniVersion: '1.0.0', supportedVersions: SUPPORTED_VERSIONS } });
    const fromAgent = await agentClient.cni(socket, {
      env: { CNI_COMMAND: 'VERSION' },
      stdin: '{"cniVersion":"1.0.0"}',
    });
    expect(r.stdout).toBe(fromAgent.stdout);
    expect((await plugin({ CNI_COMMAND: 'VERSION' }, '{"cniVersion":"0.4.0"}')).stdout).toBe(fromAgent.stdout);
  });

  it('carries ADD, CHECK, DEL, STATUS and GC to the agent and prints its answers exactly', async () => {
    const add = await plugin(vars('ADD', 'pod-1'), conf());
    expect(add.code).toBe(0);
    expect(add.out).toEqual({
      cniVersion: '1.0.0',
      ips: [{ address: `${IPS[0]}/24`, gateway: '10.4.0.253' }],
      routes: [{ dst: '0.0.0.0/0', gw: '10.4.0.253' }],
      dns: {},
      eniIpam: { eniId: 'eni-a', mac: '00:16:3e:00:00:0b', vSwitchCidr: '10.4.0.0/24' },
    });
    // Byte for byte what the endpoint answers for the same call (a repeated ADD gives the same lease).
    expect(add.stdout).toBe((await agentClient.cni(socket, { env: vars('ADD', 'pod-1'), stdin: conf() })).stdout);
    expect(await plugin(vars('CHECK', 'pod-1'), conf({ prevResult: add.out }))).toMatchObject({ code: 0, stdout: '' });
    expect(await plugin(vars('CHECK', 'pod-2'), conf())).toMatchObject({ code: 1, out: { code: 3 } });
    expect(
      await plugin({ CNI_COMMAND: 'STATUS', CNI_PATH: '/opt/cni/bin' }, conf({ cniVersion: '1.1.0' })),
    ).toMatchObject({ code: 0, stdout: '' });
    expect(await plugin(vars('DEL', 'pod-1'), conf({ prevResult: add.out }))).toMatchObject({ code: 0, stdout: '' });
    expect(agent.list()).toEqual([]);
    expect(await plugin(vars('DEL', 'pod-1'), conf())).toMatchObject({ code: 0, stdout: '' });
    expect(
      await plugin(
        { CNI_COMMAND: 'GC', CNI_PATH: '/opt/cni/bin' },
        conf({ cniVersion: '1.1.0', 'cni.dev/valid-attachments': [] }),
      ),
    ).toMatchObject({ code: 0, stdout: '' });
    // The agent's errors come through with their codes.
    expect(await plugin(vars('ADD', 'x', { CNI_NETNS: '' }), conf())).toMatchObject({
      code: 1,
      out: { code: 4, msg: expect.stringContaining('CNI_NETNS is not set') },
    });
  });

  it('sends the variables and the configuration intact, whatever they hold', async () => {
    const name = 'we"ird\\name\twith\nnewline-é';
    const add = await plugin(
      vars('ADD', 'pod-odd', { CNI_ARGS: `K8S_POD_NAMESPACE=default;K8S_POD_NAME=${name}` }),
      conf({ note: 'quotes " and \\ and \u0001 control' }),
    );
    expect(add.code).toBe(0);
    expect(agent.list().find((a) => a.containerId === 'pod-odd')?.pod).toBe(`default/${name}`);
    // The socket found through whitespace, escapes (\/ and \u) and a duplicate key (the last wins, as in JSON.parse).
    const escaped = socket.replace(/\//g, '\\/').replace(/a/g, '\\u0061');
    const text = `\n {\n\t"ipam" : {"socket": "/nowhere.sock"},\r\n  "cniVersion"\t: "1.0.0" ,"name":"pods",\n  "args": {"nested": [1, {"ipam": {"socket": "/no"}}], "n": -1.5e3, "t": true, "z": null},\n  "ipam" : { "type" : "eni-ipam-cni" , "timeoutSeconds": 5 , "socket" : "${escaped}" }\n}\n`;
    expect(await plugin(vars('DEL', 'pod-odd'), text)).toMatchObject({ code: 0, stdout: '' });
    expect(agent.list().find((a) => a.containerId === 'pod-odd')).toBeUndefined();
  });

  it('finds ipam.socket in any configuration JSON.parse reads the same way (generated)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 4 }),
        fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }),
        fc.constantFrom(undefined, 0, 1, 2, '\t', ' \r\n '),
        async (top, ipamExtra, indent) => {
          const text = JSON.stringify(
            { ...top, cniVersion: '1.1.0', ipam: { ...ipamExtra, type: 'eni-ipam-cni', socket } },
            null,
            indent as string | number | undefined,
          );
          const r = await plugin({ CNI_COMMAND: 'STATUS', CNI_PATH: '/opt/cni/bin' }, text);
          expect(r).toMatchObject({ code: 0, stdout: '' });
        },
      ),
      { numRuns: 40 },
    );
  }, 60_000);

  it('rejects what it cannot carry, saying why', async () => {
    expect(await plugin(vars('ADD'), conf({}, { socket: 42 }))).toMatchObject({
      code: 1,
      out: { code: 7, msg: expect.stringContaining('ipam.socket must be the path') },
    });
    expect(await plugin(vars('ADD'), conf({}, { socket: `/${'x'.repeat(120)}` }))).toMatchObject({
      code: 1,
      out: { code: 7, msg: expect.stringContaining('at most 107 bytes') },
    });
    expect(await plugin(vars('ADD'), conf({}, { socket, timeoutSeconds: 0 }))).toMatchObject({
      code: 1,
      out: { code: 7, msg: expect.stringContaining('ipam.timeoutSeconds') },
    });
    expect(await plugin(vars('ADD'), conf({ big: 'x'.repeat(130 * 1024) }))).toMatchObject({
      code: 1,
      out: { code: 5, msg: 'the network configuration on stdin exceeds 128 KiB' },
    });
    // Without CNI_COMMAND (someone running it by hand) it answers at once, as the agent would.
    const bare = await plugin({}, '');
    expect(bare).toMatchObject({ code: 1, out: { code: 4 } });
    expect(bare.stdout).toBe((await agentClient.cni(socket, { env: {}, stdin: '' })).stdout);
  });
});

describe('eni-ipam-cni without a working agent', () => {
  it('says try again later (11), naming the socket, when nothing listens there', async () => {
    const missing = join(dir, 'missing.sock');
    const r = await plugin(vars('ADD'), conf({ cniVersion: '0.4.0' }, { socket: missing }));
    expect(r).toMatchObject({
      code: 1,
      out: {
        cniVersion: '0.4.0',
        code: 11,
        msg: `cannot reach the eni-ipam agent at ${missing} (No such file or directory); try again later: is the agent running on this node?`,
      },
    });
    expect(r.ms).toBeLessThan(2000);
    // A socket file a killed agent left behind: connection refused.
    const stale = join(dir, 'stale.sock');
    spawnSync(
      process.execPath,
      [
        '-e',
        `require('node:net').createServer().listen(${JSON.stringify(stale)}, () => process.kill(process.pid, 'SIGKILL'))`,
      ],
      { stdio: 'ignore' },
    );
    expect(await plugin(vars('DEL'), conf({}, { socket: stale }))).toMatchObject({
      code: 1,
      out: {
        code: 11,
        msg: expect.stringContaining(`cannot reach the eni-ipam agent at ${stale} (Connection refused)`),
      },
    });
    // STATUS reports the plugin not available (50) instead.
    expect(
      await plugin(
        { CNI_COMMAND: 'STATUS', CNI_PATH: '/opt/cni/bin' },
        conf({ cniVersion: '1.1.0' }, { socket: missing }),
      ),
    ).toMatchObject({ code: 1, out: { code: 50, msg: expect.stringContaining(missing) } });
  });

  it('says try again later (11) when the agent closes the connection without answering', async () => {
    const closing = join(dir, 'closing.sock');
    const rude: Server = createServer((s) => s.once('data', () => s.destroy()));
    await new Promise<void>((r) => rude.listen(closing, r));
    try {
      expect(await plugin(vars('ADD'), conf({}, { socket: closing }))).toMatchObject({
        code: 1,
        out: {
          code: 11,
          msg: `cannot reach the eni-ipam agent at ${closing} (it closed the connection without answering); try again later: is the agent running on this node?`,
        },
      });
    } finally {
      rude.close();
    }
  });

  it('reports an answer that is not a CNI answer as an I/O error (5), with what came', async () => {
    const odd = join(dir, 'odd.sock');
    let answer = '';
    const server2: Server = createServer((s) => s.once('data', () => s.end(answer)));
    await new Promise<void>((r) => server2.listen(odd, r));
    try {
      const body = '{"message":"no \\"x\\""}';
      answer = `HTTP/1.1 400 Bad Request\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
      expect(await plugin(vars('ADD'), conf({}, { socket: odd }))).toMatchObject({
        code: 1,
        out: { code: 5, msg: `the eni-ipam agent at ${odd} refused the request: HTTP 400 {"message":"no \\"x\\""}` },
      });
      answer = 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}';
      expect(await plugin(vars('ADD'), conf({}, { socket: odd }))).toMatchObject({
        code: 1,
        out: { code: 5, msg: expect.stringContaining('refused the request: HTTP 200') },
      });
      answer = 'SSH-2.0-OpenSSH\r\n';
      expect(await plugin(vars('ADD'), conf({}, { socket: odd }))).toMatchObject({
        code: 1,
        out: { code: 5, msg: `the eni-ipam agent at ${odd} answered something unreadable: the answer is not HTTP` },
      });
    } finally {
      server2.close();
    }
  });

  it('gives up after ipam.timeoutSeconds when the agent accepts and never answers', async () => {
    const hung = join(dir, 'hung.sock');
    const held: Socket[] = [];
    const silent: Server = createServer((s) => held.push(s));
    await new Promise<void>((r) => silent.listen(hung, r));
    try {
      const r = await plugin(vars('ADD'), conf({}, { socket: hung, timeoutSeconds: 0.8 }));
      expect(r).toMatchObject({
        code: 1,
        out: {
          code: 11,
          msg: `the eni-ipam agent at ${hung} did not answer within 0.8 s (ipam.timeoutSeconds); try again later`,
        },
      });
      expect(r.ms).toBeGreaterThanOrEqual(800);
      expect(r.ms).toBeLessThan(2500);
      const status = await plugin(
        { CNI_COMMAND: 'STATUS', CNI_PATH: '/opt/cni/bin' },
        conf({ cniVersion: '1.1.0' }, { socket: hung, timeoutSeconds: 0.3 }),
      );
      expect(status).toMatchObject({
        code: 1,
        out: { code: 50, msg: expect.stringContaining('did not answer within 0.3 s') },
      });
    } finally {
      for (const s of held) s.destroy();
      silent.close();
    }
  });
});

// The default socket is a fixed host path: reached in a private mount namespace (root only).
const canMount = process.getuid?.() === 0 && spawnSync('sh', ['-c', 'command -v unshare']).status === 0;
if (!canMount)
  console.warn(
    'default-socket test skipped: it needs root and unshare (util-linux) to mount over /run/eni-ipam privately',
  );
(canMount ? describe : describe.skip)('eni-ipam-cni with no ipam.socket', () => {
  it('goes to /run/eni-ipam/agent.sock', async () => {
    // A fresh /run in a private mount namespace: nothing on the host changes.
    const script =
      'mount -t tmpfs tmpfs /run && mkdir /run/eni-ipam && mount --bind "$SOCKET_DIR" /run/eni-ipam && exec env -i CNI_COMMAND=ADD CNI_CONTAINERID=pod-default CNI_NETNS=/x CNI_IFNAME=eth0 "$PLUGIN"';
    const env = { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', SOCKET_DIR: dir, PLUGIN };
    try {
      // The agent runs in this process: the plugin must run asynchronously for it to answer.
      const run = await plugin(env, conf({}, {}), 'unshare', ['--mount', 'sh', '-c', script]);
      expect(run).toMatchObject({ code: 0, out: { ips: [{ address: expect.stringMatching(/^10\.4\.0\.\d+\/24$/) }] } });
      expect(agent.list().map((a) => a.containerId)).toContain('pod-default');
      // A configuration it cannot read goes there too, and the agent names the error.
      const bad = await plugin(
        env,
        `{"cniVersion": "1.0.0", "ipam": {"socket": ${JSON.stringify(socket)}}, oops}`,
        'unshare',
        ['--mount', 'sh', '-c', script],
      );
      expect(bad).toMatchObject({
        code: 1,
        out: { cniVersion: '1.0.0', code: 6, msg: 'the network configuration on stdin is not valid JSON' },
      });
    } finally {
      agent.release('pod-default', 'eth0');
    }
  });
});
