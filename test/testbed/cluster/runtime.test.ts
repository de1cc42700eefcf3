/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runtimeUnavailable, startCluster, type EmulatedCluster } from '../../../testbed/cluster/index.js';
import { cniPluginsUnavailable } from '../../../testbed/cluster/runtime/node-image.js';
import { eventually } from '../../helpers/ecs.js';
import { kubectlFor, type Kubectl } from '../../helpers/kube.js';
import { installHostLocalConflist } from '../../helpers/node-cni.js';

const why = runtimeUnavailable() ?? cniPluginsUnavailable();
if (why) console.warn(`node runtime tests skipped: ${why}`);
const maybe = why ? describe.skip : describe;

let cluster: EmulatedCluster;
let kubectl: Kubectl;
const until = <T>(fn: () => Promise<T | undefined | false> | T | undefined | false, ms = 20_000) =>
  eventually(fn as () => Promise<T>, ms, 100);
const getPod = async (name: string) => JSON.parse((await kubectl(['get', 'pod', name, '-o', 'json'])).stdout);
const ready = (p: any) => p.status?.conditions?.some((c: any) => c.type === 'Ready' && c.status === 'True');

// A small HTTP server in eni-ipam's image: it answers /readyz once /tmp/ready... exists, and echoes what it sees.
const SERVER = `
const http = require('http'); const fs = require('fs'); const os = require('os');
const port = Number(process.env.PORT);
let healthy = true;
process.on('SIGTERM', () => { console.log('got SIGTERM'); setTimeout(() => process.exit(0), 200); });
http.createServer((req, res) => {
  if (req.url === '/readyz') { res.writeHead(200); return res.end('ok'); }
  if (req.url === '/healthz') { res.writeHead(healthy ? 200 : 500); return res.end(); }
  if (req.url === '/sick') { healthy = false; res.writeHead(200); return res.end(); }
  const read = (p) => { try { return fs.readFileSync(p, 'utf8'); } catch (e) { return 'ERR ' + e.code; } };
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify({
    hostname: os.hostname(), uid: process.getuid(), gid: process.getgid(), groups: process.getgroups(),
    env: { POD_NAME: process.env.POD_NAME, NODE: process.env.NODE, POD_IP: process.env.POD_IP, HOST_IP: process.env.HOST_IP, KSH: process.env.KUBERNETES_SERVICE_HOST, FROM_SECRET: process.env.FROM_SECRET, EXPANDED: process.env.EXPANDED },
    secret: read('/etc/creds/user'), config: read('/etc/config/greeting'), ns: read('/var/run/secrets/kubernetes.io/serviceaccount/namespace'),
    token: read('/var/run/secrets/kubernetes.io/serviceaccount/token').split('.').length, hostFile: read('/host/shared/from-init'), app: fs.existsSync('/app/dist/src/cli/main.js'),
  }));
}).listen(port, () => console.log('listening on ' + port));
`;

const pod = (name: string, extra: any = {}) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: 'default', labels: { app: name } },
  spec: {
    nodeName: extra.nodeName,
    hostNetwork: extra.hostNetwork,
    terminationGracePeriodSeconds: 5,
    securityContext: { runAsUser: 1234, runAsGroup: 2345, fsGroup: 3456 },
    initContainers: [
      {
        name: 'init',
        image: 'ghcr.io/eni-ipam/eni-ipam:0.1.0',
        command: ['sh', '-c', 'echo init ran > /host/shared/from-init'],
        securityContext: { runAsUser: 0 },
        volumeMounts: [{ name: 'host', mountPath: '/host/shared' }],
      },
    ],
    containers: [
      {
        name: 'server',
        image: extra.image ?? 'ghcr.io/eni-ipam/eni-ipam:0.1.0',
        command: ['node', '-e', SERVER],
        ports: [{ name: 'http', containerPort: extra.port ?? 8000 }],
        env: [
          { name: 'PORT', value: String(extra.port ?? 8000) },
          { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
          { name: 'NODE', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
          { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
          { name: 'HOST_IP', valueFrom: { fieldRef: { fieldPath: 'status.hostIP' } } },
          { name: 'FROM_SECRET', valueFrom: { secretKeyRef: { name: 'creds', key: 'user' } } },
          { name: 'EXPANDED', value: 'pod $(POD_NAME) on $(NODE)' },
        ],
        readinessProbe: { httpGet: { path: '/readyz', port: 'http' }, periodSeconds: 1 },
        livenessProbe: { httpGet: { path: '/healthz', port: 'http' }, periodSeconds: 1, failureThreshold: 2 },
        volumeMounts: [
          { name: 'creds', mountPath: '/etc/creds', readOnly: true },
          { name: 'config', mountPath: '/etc/config' },
          { name: 'host', mountPath: '/host/shared' },
        ],
      },
    ],
    volumes: [
      { name: 'creds', secret: { secretName: 'creds', defaultMode: 0o440 } },
      { name: 'config', configMap: { name: 'config' } },
      { name: 'host', hostPath: { path: '/var/lib/shared', type: 'DirectoryOrCreate' } },
    ],
  },
});

maybe('the node runtime (root)', () => {
  beforeAll(async () => {
    cluster = await startCluster({
      nodes: 2,
      registerWithTaints: [],
      workDir: mkdtempSync(join(tmpdir(), 'cluster-')),
      backoffBaseMs: 1000,
    });
    kubectl = kubectlFor(cluster.kube);
    // Pods outside the host network get their addresses from the node's CNI chain: here the
    // standard ptp and host-local over the node's podCIDR.
    for (const node of cluster.nodes) {
      const n = (await cluster.kube.rest('GET', `/api/v1/nodes/${node}`)).body;
      installHostLocalConflist(cluster, node, 'pods', { subnet: n.spec.podCIDR });
    }
    expect((await kubectl(['create', 'secret', 'generic', 'creds', '--from-literal=user=alice'])).code).toBe(0);
    expect((await kubectl(['create', 'configmap', 'config', '--from-literal=greeting=hello'])).code).toBe(0);
  }, 60_000);

  afterAll(async () => {
    await cluster?.close();
  });

  test('a pod runs as processes in its own namespaces: hostname, address from the node range, volumes, env, user; probes make it Ready', async () => {
    expect((await kubectl(['apply', '-f', '-'], JSON.stringify(pod('web', { nodeName: cluster.nodes[0] })))).code).toBe(
      0,
    );
    const p = await until(async () => {
      const x = await getPod('web');
      return ready(x) && x;
    });
    const node = (await cluster.kube.rest('GET', `/api/v1/nodes/${cluster.nodes[0]}`)).body;
    expect(p.status.podIP.startsWith(node.spec.podCIDR.split('.').slice(0, 3).join('.'))).toBe(true);
    const seen: any = await (await fetch(`http://${p.status.podIP}:8000/`)).json();
    expect(seen).toMatchObject({
      hostname: 'web',
      uid: 1234,
      gid: 2345,
      env: {
        POD_NAME: 'web',
        NODE: cluster.nodes[0],
        POD_IP: p.status.podIP,
        HOST_IP: p.status.hostIP,
        KSH: cluster.network.hostAddress,
        FROM_SECRET: 'alice',
        EXPANDED: `pod web on ${cluster.nodes[0]}`,
      },
      secret: 'alice',
      config: 'hello',
      ns: 'default',
      token: 3,
      hostFile: 'init ran\n',
      app: true,
    });
    expect(seen.groups).toContain(3456);
    const wide = await kubectl(['get', 'pod', 'web', '-o', 'wide']);
    expect(wide.stdout).toMatch(
      new RegExp(
        `web\\s+1/1\\s+Running\\s+0\\s+\\S+\\s+${p.status.podIP.replace(/\./g, '\\.')}\\s+${cluster.nodes[0]}`,
      ),
    );
    expect((await kubectl(['logs', 'web'])).stdout).toContain('listening on 8000');
    // kubectl exec runs in the container as its user, with its volumes.
    expect((await kubectl(['exec', 'web', '--', 'id', '-u'])).stdout).toBe('1234\n');
    expect((await kubectl(['exec', 'web', '--', 'cat', '/etc/config/greeting'])).stdout).toBe('hello');
    expect((await kubectl(['logs', 'web', '-c', 'init'])).code).toBe(0);
  }, 60_000);

  test('a liveness failure restarts the container (previous logs kept); delete sends SIGTERM and removes the pod', async () => {
    const p = await getPod('web');
    await fetch(`http://${p.status.podIP}:8000/sick`);
    const restarted = await until(async () => {
      const x = await getPod('web');
      return x.status.containerStatuses[0].restartCount >= 1 && ready(x) && x;
    });
    expect(restarted.status.containerStatuses[0].lastState.terminated).toBeDefined();
    expect((await kubectl(['logs', 'web', '--previous'])).stdout).toContain('got SIGTERM');
    const events = (await kubectl(['get', 'events', '--field-selector', 'involvedObject.name=web', '-o', 'json']))
      .stdout;
    expect(events).toContain('Liveness probe failed');
    const del = await kubectl(['delete', 'pod', 'web', '--wait=true', '--timeout=30s']);
    expect(del.code).toBe(0);
    expect((await kubectl(['get', 'pod', 'web'])).stderr).toContain('NotFound');
    // Its network namespace went with it.
    expect(execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' })).not.toContain(`ecp${cluster.network.id}-`);
  }, 60_000);

  test("a hostNetwork pod runs in its node's namespaces, at the node address, with the node's hostname", async () => {
    expect(
      (
        await kubectl(
          ['apply', '-f', '-'],
          JSON.stringify(pod('hostnet', { nodeName: cluster.nodes[1], hostNetwork: true, port: 8010 })),
        )
      ).code,
    ).toBe(0);
    const p = await until(async () => {
      const x = await getPod('hostnet');
      return ready(x) && x;
    });
    expect(p.status.podIP).toBe(p.status.hostIP);
    // It shares the node's UTS namespace too: its hostname is the node's, not the pod's name.
    const seen = (await (await fetch(`http://${p.status.hostIP}:8010/`)).json()) as any;
    expect(seen.hostname).toBe(cluster.nodes[1]);
    expect(seen.env.POD_NAME).toBe('hostnet');
    // The API server made its container port a port of the node.
    expect(p.spec.containers[0].ports[0]).toMatchObject({ containerPort: 8010, hostPort: 8010 });
    await kubectl(['delete', 'pod', 'hostnet', '--grace-period=1']);
  }, 60_000);

  test('exec and tcpSocket probes; a container that keeps failing is restarted with back-off (CrashLoopBackOff)', async () => {
    const spec = (name: string, container: any) => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: 'default' },
      spec: {
        nodeName: cluster.nodes[1],
        terminationGracePeriodSeconds: 2,
        containers: [{ name: 'main', image: 'eni-ipam:dev', ...container }],
      },
    });
    // Ready once it has written /tmp/ready (an exec probe in the container's root), alive while it listens (tcpSocket).
    const probed = spec('probed', {
      command: [
        'node',
        '-e',
        "setTimeout(() => require('fs').writeFileSync('/tmp/ready', ''), 1500); require('net').createServer().listen(7000)",
      ],
      readinessProbe: { exec: { command: ['test', '-f', '/tmp/ready'] }, periodSeconds: 1 },
      livenessProbe: { tcpSocket: { port: 7000 }, periodSeconds: 1 },
    });
    const failing = spec('failing', { command: ['sh', '-c', 'echo about to fail; exit 3'] });
    expect(
      (
        await kubectl(
          ['apply', '-f', '-'],
          JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [probed, failing] }),
        )
      ).code,
    ).toBe(0);
    const first = await until(async () => {
      const x = await getPod('probed');
      return x.status.containerStatuses?.[0]?.state?.running && x;
    });
    expect(ready(first)).toBe(false);
    const p = await until(async () => {
      const x = await getPod('probed');
      return ready(x) && x;
    });
    expect(p.status.containerStatuses[0].restartCount).toBe(0);
    const f = await until(async () => {
      const x = await getPod('failing');
      return (
        x.status.containerStatuses?.[0]?.restartCount >= 2 &&
        x.status.containerStatuses[0].state.waiting?.reason === 'CrashLoopBackOff' &&
        x
      );
    });
    expect(f.status.containerStatuses[0].lastState.terminated.exitCode).toBe(3);
    expect((await kubectl(['get', 'pod', 'failing'])).stdout).toMatch(/failing\s+0\/1\s+CrashLoopBackOff\s+\d+/);
    expect((await kubectl(['logs', 'failing', '--previous'])).stdout).toContain('about to fail');
    // Followed logs end when the container does.
    const followed = await kubectl(['logs', '-f', 'failing']);
    expect(followed.code).toBe(0);
    expect(followed.stdout).toContain('about to fail');
    await kubectl(['delete', 'pod', 'probed', 'failing', '--grace-period=1']);
  }, 60_000);

  test('kubectl delete pod: a container that ignores SIGTERM is killed when the grace period ends', async () => {
    const stubborn = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'stubborn', namespace: 'default' },
      spec: {
        nodeName: cluster.nodes[0],
        terminationGracePeriodSeconds: 2,
        containers: [
          {
            name: 'main',
            image: 'eni-ipam',
            command: [
              'node',
              '-e',
              "process.on('SIGTERM', () => console.log('ignoring SIGTERM')); console.log('handler set'); setInterval(() => {}, 1000)",
            ],
          },
        ],
      },
    };
    expect((await kubectl(['apply', '-f', '-'], JSON.stringify(stubborn))).code).toBe(0);
    const p = await until(async () => {
      const x = await getPod('stubborn');
      return x.status.containerStatuses?.[0]?.state?.running && x;
    });
    const pid = Number(p.status.containerStatuses[0].containerID.split('/').at(-1));
    // Running is not yet listening for SIGTERM: Node takes a moment to reach the handler.
    await until(async () => (await kubectl(['logs', 'stubborn'])).stdout.includes('handler set'));
    const t0 = Date.now();
    expect((await kubectl(['delete', 'pod', 'stubborn', '--wait=true', '--timeout=30s'])).code).toBe(0);
    const took = Date.now() - t0;
    expect(took).toBeGreaterThanOrEqual(1800);
    expect(took).toBeLessThan(10_000);
    expect(() => process.kill(pid, 0)).toThrow();
  }, 60_000);

  test('a pod with another image stays Pending and says why; a missing Secret keeps it in ContainerCreating', async () => {
    expect(
      (
        await kubectl(
          ['apply', '-f', '-'],
          JSON.stringify(pod('nginx', { nodeName: cluster.nodes[0], image: 'nginx:1.27' })),
        )
      ).code,
    ).toBe(0);
    const p = await until(async () => {
      const x = await getPod('nginx');
      return x.status.containerStatuses?.[0]?.state?.waiting?.reason === 'ImageNotRunnable' && x;
    });
    expect(p.status.phase).toBe('Pending');
    expect(p.status.containerStatuses[0].state.waiting.message).toContain("runs only eni-ipam's own image");
    const missing = pod('nosecret', { nodeName: cluster.nodes[0], port: 8020 });
    missing.spec.volumes[0]!.secret!.secretName = 'absent';
    expect((await kubectl(['apply', '-f', '-'], JSON.stringify(missing))).code).toBe(0);
    const q = await until(async () => {
      const x = await getPod('nosecret');
      return x.status.containerStatuses?.[0]?.state?.waiting?.message?.includes('secret "absent" not found') && x;
    });
    expect(q.status.containerStatuses[0].state.waiting.reason).toBe('ContainerCreating');
    await kubectl(['delete', 'pod', 'nginx', 'nosecret', '--grace-period=1']);
  }, 60_000);
  test('Services through kube-proxy: a ClusterIP from a pod of another node and from a node, a NodePort from the machine, the kubernetes Service from a pod; no endpoint, no answer', async () => {
    expect(
      (await kubectl(['apply', '-f', '-'], JSON.stringify(pod('backend', { nodeName: cluster.nodes[1], port: 8030 }))))
        .code,
    ).toBe(0);
    const svc = {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'backend', namespace: 'default' },
      spec: { type: 'NodePort', selector: { app: 'backend' }, ports: [{ port: 80, targetPort: 8030 }] },
    };
    expect((await kubectl(['apply', '-f', '-'], JSON.stringify(svc))).code).toBe(0);
    await until(async () => ready(await getPod('backend')), 30_000);
    const s = JSON.parse((await kubectl(['get', 'service', 'backend', '-o', 'json'])).stdout);
    const clusterIP: string = s.spec.clusterIP;
    const nodePort: number = s.spec.ports[0].nodePort;
    expect(clusterIP).toMatch(/^10\.96\./);
    const client = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'client', namespace: 'default' },
      spec: { nodeName: cluster.nodes[0], containers: [{ name: 'c', image: 'eni-ipam/toolbox' }] },
    };
    expect((await kubectl(['apply', '-f', '-'], JSON.stringify(client))).code).toBe(0);
    await until(async () => (await getPod('client')).status.phase === 'Running', 30_000);
    // From a pod of the other node, through the node's kube-proxy rules.
    const viaPod = (await until(async () => {
      const r = await kubectl(['exec', 'client', '--', 'curl', '-s', '-m', '3', `http://${clusterIP}/`]);
      return r.code === 0 && JSON.parse(r.stdout);
    })) as { hostname: string };
    expect(viaPod.hostname).toBe('backend');
    // From the node itself, and a NodePort from the machine (at any node's address).
    const fromNode = await cluster.kubelets[0]!.exec(['curl', '-s', '-m', '3', `http://${clusterIP}/`]);
    expect(JSON.parse(fromNode.stdout).hostname).toBe('backend');
    const nodeIP: string = (await getPod('client')).status.hostIP;
    const viaNodePort = (await (await fetch(`http://${nodeIP}:${nodePort}/`)).json()) as { hostname: string };
    expect(viaNodePort.hostname).toBe('backend');
    // The kubernetes Service, from a pod, as in-cluster clients reach it: TLS checked against the
    // cluster's CA, the pod's own service-account token.
    const sa = '/var/run/secrets/kubernetes.io/serviceaccount';
    const review = await kubectl([
      'exec',
      'client',
      '--',
      'sh',
      '-c',
      `curl -s -m 5 --cacert ${sa}/ca.crt -H "Authorization: Bearer $(cat ${sa}/token)" -H 'content-type: application/json' ` +
        `-d '{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}' https://10.96.0.1/apis/authentication.k8s.io/v1/selfsubjectreviews`,
    ]);
    expect(JSON.parse(review.stdout).status.userInfo.username).toBe('system:serviceaccount:default:default');
    // Negative control: without an endpoint the ClusterIP answers nothing.
    await kubectl(['delete', 'pod', 'backend', '--grace-period=1', '--wait=true']);
    await until(async () => {
      const r = await cluster.kubelets[0]!.exec(['curl', '-s', '-m', '2', `http://${clusterIP}/`]);
      return r.code !== 0;
    });
    await kubectl(['delete', 'pod', 'client', '--grace-period=1']);
    await kubectl(['delete', 'service', 'backend']);
  }, 120_000);
});
