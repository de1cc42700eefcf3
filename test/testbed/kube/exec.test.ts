/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile, spawn } from 'node:child_process';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { WebSocket } from 'ws';
import type { ExecRequest, ExecStreams, KubeEmulator, TerminalSize } from '../../../testbed/kube/index.js';
import { kubectlFor, type Kubectl } from '../../helpers/kube.js';
import { kube } from '../../helpers/kube-emulator.js';

// pods/exec on the API server, spoken to by the real kubectl (and a raw WebSocket client for the
// v4 protocol). The kubelet behind it is a stand-in that runs the command as a local process,
// so that what is tested is the API server's part: validation, RBAC, the upgrade, the channels.
let emu: KubeEmulator;
let kubectl: Kubectl;
const sizes: TerminalSize[] = [];
const seen: ExecRequest[] = [];

/** kubectl with extra environment and stdin that is closed once written, as a shell pipe does. */
function kubectlEnv(args: string[], o: { stdin?: string; env?: Record<string, string> } = {}) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    const child = execFile(
      'kubectl',
      ['--kubeconfig', join(kubectl.dir, 'kubeconfig'), ...args],
      {
        env: { ...process.env, HOME: kubectl.dir, KUBECACHEDIR: join(kubectl.dir, 'cache'), ...o.env },
        timeout: 30_000,
      },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
    child.stdin!.end(o.stdin ?? '');
  });
}

/** The stand-in kubelet: the command as a local process, its streams the client's. */
const localSession = (request: ExecRequest) => async (streams: ExecStreams) => {
  seen.push(request);
  streams.onResize((s) => sizes.push(s));
  if (request.command[0] === 'crash') throw new Error('the runtime could not start it');
  const child = spawn(request.command[0]!, request.command.slice(1), { stdio: ['pipe', 'pipe', 'pipe'] });
  child.stdin.on('error', () => undefined);
  if (streams.stdin) streams.stdin.pipe(child.stdin);
  else child.stdin.end();
  child.stdout.on('data', (d: Buffer) => streams.stdout?.(d));
  child.stderr.on('data', (d: Buffer) => streams.stderr?.(d));
  streams.signal.addEventListener('abort', () => child.kill('SIGKILL'));
  return new Promise<number>((resolve) => child.on('close', (code) => resolve(code ?? 137)));
};

const pod = (name: string, extra: any = {}) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: 'default' },
  spec: { nodeName: 'node-01', containers: [{ name: 'main', image: 'eni-ipam/toolbox' }], ...extra },
});

beforeAll(async () => {
  ({ emu } = await kube({ tls: true, auth: true }));
  kubectl = kubectlFor(emu);
  emu.store.hooks.podExec = (_pod, request) => localSession(request);
  for (const p of [
    pod('p'),
    pod('two', {
      containers: [
        { name: 'a', image: 'x' },
        { name: 'b', image: 'x' },
      ],
    }),
    pod('unscheduled', { nodeName: undefined }),
  ])
    expect((await kubectl(['create', '-f', '-'], JSON.stringify(p))).code).toBe(0);
  expect((await kubectl(['create', 'serviceaccount', 'robot'])).code).toBe(0);
  expect((await kubectl(['create', 'role', 'pod-reader', '--verb=get,list', '--resource=pods'])).code).toBe(0);
  expect(
    (await kubectl(['create', 'rolebinding', 'robot-reads', '--role=pod-reader', '--serviceaccount=default:robot']))
      .code,
  ).toBe(0);
});

afterAll(async () => {
  await emu.close();
});

describe('kubectl exec (pods/exec over a WebSocket)', () => {
  it('carries stdout and stderr apart, and the exit code: kubectl exits with it', async () => {
    const before = emu.requests();
    const r = await kubectlEnv(['exec', 'p', '--', 'sh', '-c', 'echo out; echo err >&2; exit 3']);
    expect(r.code).toBe(3);
    expect(r.stdout).toBe('out\n');
    expect(r.stderr).toContain('err\n');
    expect(r.stderr).toContain('command terminated with exit code 3');
    expect(seen.at(-1)).toEqual({
      container: 'main',
      command: ['sh', '-c', 'echo out; echo err >&2; exit 3'],
      stdin: false,
      stdout: true,
      stderr: true,
      tty: false,
    });
    // kubectl took the WebSocket (v5) and never fell back to SPDY.
    const after = emu.requests();
    const key = 'create pods/exec (v5.channel.k8s.io)';
    expect((after[key] ?? 0) - (before[key] ?? 0)).toBe(1);
    expect(Object.keys(after).filter((k) => k.includes('SPDY'))).toEqual([]);
    const ok = await kubectlEnv(['exec', 'p', '--', 'true']);
    expect(ok).toMatchObject({ code: 0, stdout: '', stderr: '' });
  });

  it('passes stdin and closes it when the client does (v5): echo hi | kubectl exec -i p -- cat', async () => {
    const r = await kubectlEnv(['exec', '-i', 'p', '--', 'cat'], { stdin: 'hi\nthere\n' });
    expect(r).toMatchObject({ code: 0, stdout: 'hi\nthere\n' });
    const counted = await kubectlEnv(['exec', '-i', 'p', '--', 'wc', '-c'], { stdin: 'x'.repeat(300_000) });
    expect(counted.stdout.trim()).toBe('300000');
  });

  it('names what is wrong: an unknown container, a pod on no node, a missing pod', async () => {
    const unknown = await kubectlEnv(['exec', 'p', '-c', 'nope', '--', 'true']);
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toContain('container nope is not valid for pod p');
    const unscheduled = await kubectlEnv(['exec', 'unscheduled', '--', 'true']);
    expect(unscheduled.stderr).toContain('pod unscheduled does not have a host assigned');
    const missing = await kubectlEnv(['exec', 'ghost', '--', 'true']);
    expect(missing.stderr).toContain('pods "ghost" not found');
  });

  it('refuses SPDY (kubectl with KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false) saying that it speaks WebSocket', async () => {
    const r = await kubectlEnv(['exec', 'p', '--', 'true'], { env: { KUBECTL_REMOTE_COMMAND_WEBSOCKETS: 'false' } });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('upgrade to SPDY/3.1 is not served: pods/exec is served over a WebSocket');
    expect(emu.requests()['create pods/exec (SPDY/3.1)']).toBeGreaterThanOrEqual(1);
  });

  it('is authorized as create on pods/exec (get on pods is not enough), and audited so', async () => {
    const asRobot = ['--as', 'system:serviceaccount:default:robot'];
    const denied = await kubectlEnv([...asRobot, 'exec', 'p', '--', 'true']);
    expect(denied.code).not.toBe(0);
    expect(denied.stderr).toContain(
      'pods "p" is forbidden: User "system:serviceaccount:default:robot" cannot create resource "pods/exec" in API group "" in the namespace "default"',
    );
    expect((await kubectl(['create', 'role', 'pod-exec', '--verb=create', '--resource=pods/exec'])).code).toBe(0);
    expect(
      (await kubectl(['create', 'rolebinding', 'robot-execs', '--role=pod-exec', '--serviceaccount=default:robot']))
        .code,
    ).toBe(0);
    const since = Date.now();
    const allowed = await kubectlEnv([...asRobot, 'exec', 'p', '--', 'echo', 'as robot']);
    expect(allowed).toMatchObject({ code: 0, stdout: 'as robot\n' });
    expect(emu.audit({ user: 'system:serviceaccount:default:robot', since })).toContainEqual(
      expect.objectContaining({ verb: 'create', resource: 'pods', subresource: 'exec', name: 'p', code: 101 }),
    );
  });

  it('without an upgrade, the request is answered 400 Upgrade request required', async () => {
    const answer = await new Promise<{ status: number; body: any }>((resolve, reject) => {
      const req = httpsRequest(
        `${emu.url}/api/v1/namespaces/default/pods/p/exec?command=true&stdout=true`,
        // The emulator's CA is its own: this request only needs its answer.
        { method: 'POST', headers: { authorization: `Bearer ${emu.adminToken}` }, rejectUnauthorized: false },
        (r) => {
          let text = '';
          r.on('data', (d) => (text += d));
          r.on('end', () => resolve({ status: r.statusCode!, body: JSON.parse(text) }));
        },
      );
      req.on('error', reject);
      req.end();
    });
    expect(answer.status).toBe(400);
    expect(answer.body).toMatchObject({ kind: 'Status', reason: 'BadRequest', message: 'Upgrade request required' });
  });
});

describe('the channel protocols', () => {
  /** A raw WebSocket exec: what each channel carried. */
  function wsExec(query: string, protocols: string[], onOpen?: (ws: WebSocket) => void, name = 'p') {
    return new Promise<{ protocol: string; channels: Record<number, string> }>((resolve, reject) => {
      const url = `${emu.url.replace('https', 'wss')}/api/v1/namespaces/default/pods/${name}/exec?${query}`;
      const ws = new WebSocket(url, protocols, {
        headers: { authorization: `Bearer ${emu.adminToken}` },
        rejectUnauthorized: false,
      });
      const channels: Record<number, string> = {};
      ws.on('open', () => onOpen?.(ws));
      ws.on('message', (d: Buffer) => (channels[d[0]!] = (channels[d[0]!] ?? '') + d.subarray(1).toString()));
      ws.on('close', () => resolve({ protocol: ws.protocol, channels }));
      ws.on('unexpected-response', (_req, res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d));
        res.on('end', () => reject(new Error(`upgrade refused: ${res.statusCode}: ${JSON.parse(body).message}`)));
      });
      ws.on('error', reject);
    });
  }

  it('v4.channel.k8s.io (client-node): output on channels 1 and 2, the exit code in the Status on channel 3', async () => {
    const r = await wsExec('command=sh&command=-c&command=echo%20a;echo%20b%20>%262;exit%207&stdout=true&stderr=true', [
      'v4.channel.k8s.io',
    ]);
    expect(r.protocol).toBe('v4.channel.k8s.io');
    expect(r.channels[1]).toBe('a\n');
    expect(r.channels[2]).toBe('b\n');
    expect(JSON.parse(r.channels[3]!)).toEqual({
      metadata: {},
      status: 'Failure',
      message:
        'command terminated with non-zero exit code: error executing command [sh -c echo a;echo b >&2;exit 7], exit code 7',
      reason: 'NonZeroExitCode',
      details: { causes: [{ reason: 'ExitCode', message: '7' }] },
    });
  });

  it('v5: stdin on channel 0 until [255, 0] closes it; terminal sizes on channel 4; a command that cannot start is a Failure', async () => {
    const r = await wsExec(
      'command=cat&stdin=true&stdout=true&tty=true',
      ['v5.channel.k8s.io', 'v4.channel.k8s.io'],
      (ws) => {
        ws.send(Buffer.concat([Buffer.of(4), Buffer.from('{"Width":120,"Height":40}')]));
        ws.send(Buffer.concat([Buffer.of(0), Buffer.from('typed\n')]));
        ws.send(Buffer.of(255, 0));
      },
    );
    expect(r.protocol).toBe('v5.channel.k8s.io');
    expect(r.channels[1]).toBe('typed\n');
    expect(JSON.parse(r.channels[3]!)).toEqual({ metadata: {}, status: 'Success' });
    expect(sizes).toContainEqual({ width: 120, height: 40 });
    const crash = await wsExec('command=crash&stdout=true', ['v5.channel.k8s.io']);
    expect(JSON.parse(crash.channels[3]!)).toMatchObject({
      status: 'Failure',
      reason: 'InternalError',
      message: 'Internal error occurred: error executing command in container: the runtime could not start it',
    });
  });

  it('refuses a client that offers no channel protocol it serves, or names no container of several', async () => {
    await expect(wsExec('command=true&stdout=true', ['base64.channel.k8s.io'])).rejects.toThrow('upgrade refused: 400');
    await expect(wsExec('command=true&stdout=true', ['v5.channel.k8s.io'], undefined, 'two')).rejects.toThrow(
      'upgrade refused: 400: a container name must be specified for pod two, choose one of: [a b]',
    );
  });
});
