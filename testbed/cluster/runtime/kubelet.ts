/* eslint-disable @typescript-eslint/no-explicit-any */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from '../../../src/observability/logger.js';
import { StatusError } from '../../kube/core/errors.js';
import type { ExecRequest, ExecSession } from '../../kube/pods/pod-exec.js';
import type { KubeObject } from '../../kube/core/types.js';
import type { KubeletObjects } from './node-api.js';
import { CniRuntime } from './cni.js';
import {
  LogBuffer,
  containerArgv,
  containerScript,
  imageConfig,
  startContainer,
  type ContainerSpec,
  type ImageConfig,
  inPodNamespaces,
} from './container.js';
import { ConfigError, containerEnv, expand } from './env.js';
import { execSession, runInContainer, type ExecTarget } from './exec.js';
import { RUNNABLE_IMAGES, nodeImage } from './images.js';
import type { ClusterNetwork, NodeNetwork } from './network.js';
import { NODE_CNI_BIN_DIR, NODE_CNI_CONF_DIR, NODE_CNI_DIRS, installNodeImage } from './node-image.js';
import { PodSandboxes, SandboxError, type PodSandbox } from './pod-sandbox.js';
import { runProbe } from './probes.js';
import { now, podStatus, recordPodEvent, type ContainerRun, type PodRun } from './pod-status.js';
import { MountError, containerMounts, isNetnsDir, setUpVolumes, type Mount, type TokenMinter } from './volumes.js';

export interface KubeletOptions {
  objects: KubeletObjects;
  node: string;
  network: NodeNetwork;
  cluster: ClusterNetwork;
  /** The node's directory on the machine: `root/` (hostPath volumes) and `pods/`. */
  dir: string;
  /** The checkout mounted at /app in every container. */
  checkout: string;
  apiHost: string;
  apiPort: number;
  caCert: string;
  mint: TokenMinter;
  logger: Logger;
  /** The first restart back-off (the kubelet's is 10 s, doubling to 5 minutes). */
  backoffBaseMs?: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const MAX_BACKOFF_MS = 300_000;

/**
 * The kubelet of one emulated node, with its container runtime: runs the pods bound to it whose
 * image is eni-ipam's or the toolbox as local processes (see container.ts), in the node's
 * network namespace (hostNetwork) or in a sandbox of their own that the node's CNI chain sets
 * up (see pod-sandbox.ts); sets up their volumes and environment, runs init containers first,
 * probes, restarts with back-off, writes the pod status, serves logs and exec, and terminates
 * pods on deletion (SIGTERM, SIGKILL after the grace period, then the sandbox's CNI DEL).
 */
export class Kubelet {
  private readonly pods = new Map<string, PodRun>();
  private unsubscribe?: () => void;
  private tick?: NodeJS.Timeout;
  private stopped = false;
  private readonly log: Logger;
  private readonly image: ImageConfig;
  /** The node's host paths that pods have used: what a process on the node sees at those paths. */
  private readonly hostPaths = new Set<string>();
  private execs = 0;
  private readonly sandboxes: PodSandboxes;

  constructor(private readonly o: KubeletOptions) {
    this.log = o.logger.child({ node: o.node });
    this.image = imageConfig(o.checkout);
    const root = join(o.dir, 'root');
    // The plugins run as the container runtime runs them: on the node, as root, in its network namespace.
    const cni = new CniRuntime({
      cniPath: [NODE_CNI_BIN_DIR],
      exists: (path) => existsSync(join(root, path)),
      run: (path, env, stdin) => this.exec([path], { env, stdin, timeoutMs: 120_000 }),
    });
    this.sandboxes = new PodSandboxes({
      cni,
      confDir: join(root, NODE_CNI_CONF_DIR),
      createNetns: (id) => o.cluster.addPodNamespace(id),
      removeNetns: (netns) => o.cluster.removePod(netns),
    });
  }

  get node(): string {
    return this.o.node;
  }

  start(): void {
    installNodeImage(join(this.o.dir, 'root'));
    let pending: NodeJS.Timeout | undefined;
    this.unsubscribe = this.o.objects.onChange(['pods'], () => {
      pending ??= setTimeout(() => {
        pending = undefined;
        this.sync();
      }, 5);
    });
    this.tick = setInterval(() => this.sync(), 1000);
    this.sync();
  }

  /** The containers' captured output, for `kubectl logs`. */
  logs(pod: KubeObject, container: string | undefined, previous: boolean): LogBuffer | undefined {
    const run = this.pods.get(pod.metadata.uid!);
    const c = run && (container ? run.containers.get(container) : [...run.containers.values()].find((x) => !x.init));
    return previous ? c?.previous : c?.log;
  }

  private sync(): void {
    if (this.stopped) return;
    const mine = this.o.objects.list('pods').filter((p) => p.spec?.nodeName === this.o.node);
    const seen = new Set<string>();
    for (const pod of mine) {
      const uid = pod.metadata.uid!;
      seen.add(uid);
      let run = this.pods.get(uid);
      if (!run) {
        if (pod.metadata.deletionTimestamp) {
          this.o.objects.delete('pods', pod.metadata.namespace, pod.metadata.name!, { gracePeriodSeconds: 0, uid });
          continue;
        }
        if (['Succeeded', 'Failed'].includes(pod.status?.phase)) continue;
        run = {
          uid,
          pod,
          podDir: join(this.o.dir, 'pods', uid),
          startTime: now(),
          initialized: false,
          containers: new Map(),
          tokens: [],
          tokenTimers: [],
          leftovers: [],
          terminating: false,
          gone: false,
        };
        this.pods.set(uid, run);
        void this.runPod(run).catch((e) => this.log.error({ pod: pod.metadata.name, err: e }, 'pod failed to run'));
      }
      run.pod = pod;
      if (pod.metadata.deletionTimestamp && !run.terminating) void this.terminate(run, true);
    }
    for (const run of this.pods.values()) {
      if (!seen.has(run.uid) && !run.terminating) {
        // Deleted with no grace period (--force): stop at once.
        run.gone = true;
        void this.terminate(run, false);
      }
    }
  }

  private async runPod(run: PodRun): Promise<void> {
    const pod = run.pod;
    const spec = pod.spec ?? {};
    const all = [
      ...(spec.initContainers ?? []).map((c: any) => ({ c, init: true })),
      ...(spec.containers ?? []).map((c: any) => ({ c, init: false })),
    ];
    for (const { c, init } of all) {
      run.containers.set(c.name, {
        spec: c,
        init,
        log: new LogBuffer(),
        restartCount: 0,
        state: { waiting: { reason: init ? 'PodInitializing' : 'ContainerCreating' } },
        lastState: {},
        ready: false,
        started: false,
        backoffMs: 0,
        timers: [],
        execs: new Set(),
      });
    }
    const foreign = all.find(({ c }) => !nodeImage(String(c.image ?? ''), this.image));
    if (foreign) {
      run.waiting = {
        reason: 'ImageNotRunnable',
        message:
          `the emulated node ${this.o.node} runs only ${RUNNABLE_IMAGES} as local processes; ` +
          `"${String(foreign.c.image)}" of container "${foreign.c.name}" is neither`,
      };
      this.event(run, 'Warning', 'Failed', run.waiting.message);
      this.pushStatus(run);
      return;
    }
    this.pushStatus(run);
    // The sandbox: the node's network, or a namespace of the pod's own that the node's CNI sets up.
    if (spec.hostNetwork) {
      run.netns = this.o.network.netns;
      run.podIP = this.o.network.hostIP;
    } else if (!(await this.makeSandbox(run))) return;
    // Volumes: retried until they can be set up (a Secret created later, say).
    let dirs: Map<string, string> | undefined;
    while (!dirs && !run.terminating) {
      try {
        await this.o.objects.prepare?.(run.pod);
        run.tokens = [];
        dirs = await setUpVolumes(
          {
            objects: this.o.objects,
            pod: run.pod,
            node: this.o.node,
            hostIP: this.o.network.hostIP,
            podIP: run.podIP!,
            podDir: run.podDir,
            nodeRoot: join(this.o.dir, 'root'),
            mint: this.o.mint,
            caCert: this.o.caCert,
          },
          run.tokens,
        );
        run.waiting = undefined;
      } catch (e) {
        if (!(e instanceof MountError)) throw e;
        if (run.waiting?.message !== e.message) this.event(run, 'Warning', 'FailedMount', e.message);
        run.waiting = { reason: 'ContainerCreating', message: e.message };
        this.pushStatus(run);
        await sleep(1000);
      }
    }
    if (!dirs) return;
    // The pods' network namespaces are the machine's folder, which nodeMounts() mounts as such.
    for (const v of spec.volumes ?? [])
      if (v.hostPath && !isNetnsDir(v.hostPath.path)) this.hostPaths.add(v.hostPath.path);
    for (const t of run.tokens) {
      const every = Math.max(1000, t.expirationSeconds * 800);
      run.tokenTimers.push(
        setInterval(
          () =>
            void t
              .refresh()
              .catch((e) => this.log.warn({ pod: pod.metadata.name, err: e }, 'service-account token refresh failed')),
          every,
        ),
      );
    }
    this.pushStatus(run);
    for (const c of run.containers.values()) {
      if (!c.init) continue;
      const ok = await this.runToCompletion(run, c, dirs);
      if (!ok) return;
    }
    run.initialized = true;
    this.pushStatus(run);
    await Promise.all([...run.containers.values()].filter((c) => !c.init).map((c) => this.keepRunning(run, c, dirs)));
  }

  /**
   * The pod's sandbox, retried as the kubelet retries a pod whose sandbox failed (every back-off
   * period, jittered), each failure a Warning Event naming the plugin's error; false when the pod
   * went first.
   */
  private async makeSandbox(run: PodRun): Promise<boolean> {
    while (!run.terminating) {
      let settle!: () => void;
      run.sandboxing = new Promise<void>((r) => (settle = r));
      try {
        // The kubelet stops a failed sandbox again before it makes another: its DEL, retried.
        await this.removeLeftovers(run, true);
        if (run.leftovers.length)
          throw new SandboxError(
            'FailedCreatePodSandBox',
            `failed to stop the pod's earlier sandbox "${run.leftovers[0]!.id}": its network is not torn down yet`,
          );
        const sandbox = await this.sandboxes.create(run.pod);
        run.sandbox = sandbox;
        run.netns = sandbox.netns;
        run.podIP = sandbox.podIPs[0];
        run.podIPs = sandbox.podIPs;
        run.waiting = undefined;
        this.log.info({ pod: run.pod.metadata.name, sandbox: sandbox.id, podIPs: sandbox.podIPs }, 'pod sandbox ready');
        return !run.terminating;
      } catch (e) {
        if (!(e instanceof SandboxError)) throw e;
        if (e.leftover) run.leftovers.push(e.leftover);
        this.log.warn({ pod: run.pod.metadata.name, err: e.message }, 'pod sandbox failed');
        this.event(run, 'Warning', e.reason, e.message);
        run.waiting = { reason: 'ContainerCreating', message: e.message };
        this.pushStatus(run);
      } finally {
        settle();
      }
      const base = this.o.backoffBaseMs ?? 10_000;
      const until = Date.now() + base * (1 + Math.random() / 2);
      while (!run.terminating && !this.stopped && Date.now() < until) await sleep(Math.min(200, until - Date.now()));
    }
    return false;
  }

  /**
   * Removes the pod's sandbox: CNI DEL of its networks, then its namespace. A DEL that fails is
   * retried (a Warning Event says why) while the pod is there to delete, as the kubelet keeps a
   * pod Terminating until its sandbox is gone; with `once`, one attempt.
   */
  private async removeSandbox(run: PodRun, once: boolean): Promise<void> {
    await run.sandboxing;
    await this.removeLeftovers(run, once);
    const sandbox = run.sandbox;
    if (!sandbox) return;
    if (await this.removeOne(run, sandbox, once)) run.sandbox = undefined;
  }

  /** The failed sandboxes whose DEL failed, removed now (with `once`, one attempt each). */
  private async removeLeftovers(run: PodRun, once: boolean): Promise<void> {
    for (const sandbox of [...run.leftovers])
      if (await this.removeOne(run, sandbox, once)) run.leftovers.splice(run.leftovers.indexOf(sandbox), 1);
  }

  /** One sandbox's DEL and namespace, retried unless `once`; whether it is gone. */
  private async removeOne(run: PodRun, sandbox: PodSandbox, once: boolean): Promise<boolean> {
    for (;;) {
      try {
        await this.sandboxes.remove(sandbox);
        return true;
      } catch (e) {
        const message = (e as Error).message;
        this.log.warn({ pod: run.pod.metadata.name, sandbox: sandbox.id, err: message }, 'pod sandbox not removed');
        const pod = this.o.objects.get('pods', run.pod.metadata.namespace, run.pod.metadata.name!);
        if (once || this.stopped || !pod || pod.metadata.uid !== run.uid) return false;
        this.event(
          run,
          'Warning',
          'FailedKillPod',
          `error killing pod: failed to "KillPodSandbox" for "${run.uid}" with KillPodSandboxError: ` +
            `"rpc error: code = Unknown desc = ${message}"`,
        );
        await sleep(this.o.backoffBaseMs ?? 10_000);
      }
    }
  }

  /** An init container: run until it exits 0, restarting with back-off (restartPolicy Never: the pod fails). */
  private async runToCompletion(run: PodRun, c: ContainerRun, dirs: Map<string, string>): Promise<boolean> {
    while (!run.terminating) {
      const code = await this.startOnce(run, c, dirs);
      if (run.terminating) return false;
      if (code === 0) return true;
      if (run.pod.spec?.restartPolicy === 'Never') {
        this.finish(run, 'Failed');
        return false;
      }
      await this.backOff(run, c);
    }
    return false;
  }

  /**
   * A regular container: restarted whenever it exits (restartPolicy Always; OnFailure: unless it
   * exits 0; Never: not).
   */
  private async keepRunning(run: PodRun, c: ContainerRun, dirs: Map<string, string>): Promise<void> {
    while (!run.terminating) {
      const started = Date.now();
      const code = await this.startOnce(run, c, dirs);
      if (run.terminating) return;
      const policy = run.pod.spec?.restartPolicy ?? 'Always';
      if (policy === 'Never' || (policy === 'OnFailure' && code === 0)) {
        const done = [...run.containers.values()].filter((x) => !x.init).every((x) => x.state.terminated);
        if (done)
          this.finish(
            run,
            [...run.containers.values()].some((x) => !x.init && x.state.terminated.exitCode !== 0)
              ? 'Failed'
              : 'Succeeded',
          );
        return;
      }
      // Ten minutes of running resets the back-off.
      if (Date.now() - started > 600_000) c.backoffMs = 0;
      await this.backOff(run, c);
    }
  }

  /** A pod whose containers are done for good: its final phase, and its sandbox goes (its address is free again). */
  private finish(run: PodRun, phase: 'Succeeded' | 'Failed'): void {
    this.pushStatus(run, phase);
    void this.removeSandbox(run, false).catch((e) =>
      this.log.warn({ pod: run.pod.metadata.name, err: e }, 'sandbox of a finished pod not removed'),
    );
  }

  private async backOff(run: PodRun, c: ContainerRun): Promise<void> {
    c.backoffMs = c.backoffMs ? Math.min(MAX_BACKOFF_MS, c.backoffMs * 2) : (this.o.backoffBaseMs ?? 10_000);
    const message =
      `back-off ${Math.round(c.backoffMs / 1000)}s restarting failed container=${c.spec.name} ` +
      `pod=${run.pod.metadata.name}_${run.pod.metadata.namespace}(${run.uid})`;
    c.state = { waiting: { reason: 'CrashLoopBackOff', message } };
    this.event(
      run,
      'Warning',
      'BackOff',
      `Back-off restarting failed container ${c.spec.name} in pod ` +
        `${run.pod.metadata.name}_${run.pod.metadata.namespace}(${run.uid})`,
    );
    this.pushStatus(run);
    const until = Date.now() + c.backoffMs;
    while (!run.terminating && Date.now() < until) await sleep(Math.min(200, until - Date.now()));
  }

  /** Starts a container once and resolves with its exit code (probes run while it lives). */
  private async startOnce(run: PodRun, c: ContainerRun, dirs: Map<string, string>): Promise<number> {
    const pod = run.pod;
    const image = nodeImage(String(c.spec.image), this.image)!;
    const sc = { ...pod.spec?.securityContext, ...c.spec.securityContext };
    const uid = sc.runAsUser ?? image.user;
    const gid = sc.runAsGroup ?? (uid === image.user ? image.group : uid === 0 ? 0 : image.group);
    let env: Record<string, string>;
    try {
      if (sc.runAsNonRoot && uid === 0) throw new ConfigError('container has runAsNonRoot and image will run as root');
      env = containerEnv(
        {
          objects: this.o.objects,
          pod,
          hostIP: this.o.network.hostIP,
          podIP: run.podIP!,
          apiHost: this.o.apiHost,
          apiPort: this.o.apiPort,
          image,
        },
        c.spec,
        uid,
      );
    } catch (e) {
      if (!(e instanceof ConfigError)) throw e;
      c.state = { waiting: { reason: 'CreateContainerConfigError', message: e.message } };
      this.event(run, 'Warning', 'Failed', `Error: ${e.message}`);
      this.pushStatus(run);
      await sleep(2000);
      return -1;
    }
    if (c.restartCount > 0 || c.state.terminated || c.lastState.terminated) {
      c.previous = c.log;
      c.log = new LogBuffer();
    }
    const groups = [
      ...new Set([
        ...(sc.fsGroup !== undefined ? [sc.fsGroup] : []),
        ...(pod.spec?.securityContext?.supplementalGroups ?? []),
      ]),
    ];
    const drop: string[] = c.spec.securityContext?.capabilities?.drop ?? [];
    const process: ContainerSpec = {
      name: c.spec.name,
      stageDir: join(run.podDir, 'containers', c.spec.name),
      netns: run.netns!,
      // A host-network pod shares its node's UTS namespace, as with a real container runtime.
      hostname: pod.spec?.hostNetwork ? this.o.node : pod.metadata.name!,
      // eni-ipam's image is this checkout; the toolbox is the machine's root alone.
      checkout: image === this.image ? this.o.checkout : undefined,
      workdir: image.workdir,
      argv: containerArgv(c.spec, image).map((a) => expand(a, env)),
      env,
      mounts: containerMounts(c.spec, dirs),
      uid,
      gid,
      groups,
      readOnlyRoot: Boolean(c.spec.securityContext?.readOnlyRootFilesystem),
      dropAllCaps: drop.includes('ALL'),
      addCaps: c.spec.securityContext?.capabilities?.add,
      noNewPrivs: c.spec.securityContext?.allowPrivilegeEscalation === false,
    };
    const proc = startContainer(process, c.log);
    c.proc = proc;
    c.process = process;
    const startedAt = now();
    c.state = { running: { startedAt } };
    c.started = !c.spec.startupProbe;
    c.ready = !c.init && !c.spec.readinessProbe && !c.spec.startupProbe;
    this.event(run, 'Normal', 'Started', `Started container ${c.spec.name}`);
    this.pushStatus(run);
    c.exited = new Promise<number>((resolve) =>
      proc.on('exit', (code, signal) =>
        resolve(code ?? (signal === 'SIGKILL' ? 137 : signal === 'SIGTERM' ? 143 : 128)),
      ),
    );
    if (!c.init) this.startProbes(run, c);
    const code = await c.exited;
    c.timers.forEach(clearTimeout);
    c.timers = [];
    // Commands run in it go with it, as they go with a container's PID namespace.
    for (const x of c.execs) x.kill('SIGKILL');
    c.proc = undefined;
    c.ready = false;
    c.started = false;
    c.restartCount += run.terminating || c.init ? 0 : 1;
    c.state = {
      terminated: { exitCode: code, reason: code === 0 ? 'Completed' : 'Error', startedAt, finishedAt: now() },
    };
    if (!c.init) c.lastState = { terminated: c.state.terminated };
    this.log.info({ pod: pod.metadata.name, container: c.spec.name, exitCode: code }, 'container exited');
    this.pushStatus(run);
    return code;
  }

  /** Startup, readiness and liveness probes on their periods, with their thresholds. */
  private startProbes(run: PodRun, c: ContainerRun): void {
    const schedule = (probe: any, kind: 'startup' | 'readiness' | 'liveness') => {
      if (!probe) return;
      let successes = 0;
      let failures = 0;
      const period = (probe.periodSeconds ?? 10) * 1000;
      const once = async () => {
        if (!c.proc || run.terminating) return;
        if (kind !== 'startup' && !c.started) {
          c.timers.push(setTimeout(() => void once(), period));
          return;
        }
        const target = this.execTarget(c);
        const r = await runProbe(
          probe,
          c.spec,
          run.podIP!,
          target && ((argv, timeoutMs) => runInContainer(target, argv, timeoutMs)),
        );
        if (!c.proc || run.terminating) return;
        if (r.ok) {
          failures = 0;
          successes++;
          if (kind === 'startup' && !c.started) {
            c.started = true;
            if (!c.spec.readinessProbe) c.ready = true;
            this.pushStatus(run);
            return;
          }
          if (kind === 'readiness' && !c.ready && successes >= (probe.successThreshold ?? 1)) {
            c.ready = true;
            this.pushStatus(run);
          }
        } else {
          successes = 0;
          failures++;
          const label = kind[0]!.toUpperCase() + kind.slice(1);
          this.event(run, 'Warning', 'Unhealthy', `${label} probe failed: ${r.message ?? ''}`);
          if (kind === 'readiness' && c.ready && failures >= (probe.failureThreshold ?? 3)) {
            c.ready = false;
            this.pushStatus(run);
          }
          if (kind !== 'readiness' && failures >= (probe.failureThreshold ?? 3)) {
            this.event(run, 'Normal', 'Killing', `Container ${c.spec.name} failed ${kind} probe, will be restarted`);
            void this.stopContainer(c, run.pod.spec?.terminationGracePeriodSeconds ?? 30);
            return;
          }
        }
        if (kind === 'startup' && c.started) return;
        c.timers.push(setTimeout(() => void once(), period));
      };
      c.timers.push(setTimeout(() => void once(), (probe.initialDelaySeconds ?? 0) * 1000));
    };
    schedule(c.spec.startupProbe, 'startup');
    schedule(c.spec.readinessProbe, 'readiness');
    schedule(c.spec.livenessProbe, 'liveness');
  }

  /** SIGTERM, then SIGKILL after the grace period. */
  private async stopContainer(c: ContainerRun, graceSeconds: number): Promise<void> {
    const proc = c.proc;
    if (!proc || !c.exited) return;
    proc.kill('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    const killed = await Promise.race([
      c.exited.then(() => false),
      new Promise<boolean>((r) => (timer = setTimeout(() => r(true), graceSeconds * 1000))),
    ]);
    clearTimeout(timer);
    if (killed && c.proc === proc) {
      proc.kill('SIGKILL');
      await c.exited;
    }
  }

  /** Stops a pod's containers (within its deletion grace period), removes its sandbox, then deletes it for good. */
  private async terminate(run: PodRun, graceful: boolean): Promise<void> {
    run.terminating = true;
    const grace = graceful
      ? (run.pod.metadata.deletionGracePeriodSeconds ?? run.pod.spec?.terminationGracePeriodSeconds ?? 30)
      : 0;
    const live = [...run.containers.values()].filter((c) => c.proc);
    if (live.length && graceful)
      this.event(run, 'Normal', 'Killing', `Stopping container ${live.map((c) => c.spec.name).join(', ')}`);
    await Promise.all(live.map((c) => this.stopContainer(c, grace)));
    run.tokenTimers.forEach(clearInterval);
    await this.removeSandbox(run, !graceful);
    rmSync(run.podDir, { recursive: true, force: true });
    if (run.statusTimer) clearTimeout(run.statusTimer);
    this.pods.delete(run.uid);
    if (!run.gone)
      this.o.objects.delete('pods', run.pod.metadata.namespace, run.pod.metadata.name!, {
        gracePeriodSeconds: 0,
        uid: run.uid,
      });
  }

  /** The node's own paths for a process on the node: its CNI folders and the host paths its pods mount. */
  private nodeMounts(): Mount[] {
    const root = join(this.o.dir, 'root');
    const paths = [...new Set([...NODE_CNI_DIRS, ...this.hostPaths])].sort((a, b) => a.length - b.length);
    return [
      ...paths.map((p) => ({ source: join(root, p), target: p, readOnly: false })),
      // The pods' network namespaces (CNI_NETNS), with the namespace mounts in that folder.
      { source: '/run/netns', target: '/run/netns', readOnly: false, recursive: true },
    ];
  }

  /**
   * Runs a command on the node, as root in its network namespace, with its CNI folders and the
   * host paths its pods mount where they are on the node: a CNI plugin call as the container
   * runtime makes it, say.
   */
  exec(
    argv: string[],
    o: { stdin?: string; env?: Record<string, string>; timeoutMs?: number } = {},
  ): Promise<{ code: number; stdout: string; stderr: string }> {
    const stageDir = join(this.o.dir, 'exec', String(++this.execs));
    const script = containerScript({
      name: 'exec',
      stageDir,
      netns: this.o.network.netns,
      hostname: this.o.node,
      checkout: this.o.checkout,
      workdir: this.image.workdir,
      argv,
      env: {},
      mounts: this.nodeMounts(),
      uid: 0,
      gid: 0,
      groups: [],
      readOnlyRoot: false,
      dropAllCaps: false,
      noNewPrivs: false,
    });
    mkdirSync(stageDir, { recursive: true });
    return new Promise((resolve) => {
      const child = execFile(
        'nsenter',
        inPodNamespaces(this.o.network.netns, script),
        { env: { PATH: this.image.env.PATH ?? '/usr/bin:/bin', ...o.env }, timeout: o.timeoutMs ?? 30_000 },
        (err, stdout, stderr) => {
          rmSync(stageDir, { recursive: true, force: true });
          resolve({
            code: err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 1) : 0,
            stdout,
            stderr,
          });
        },
      );
      child.stdin!.end(o.stdin ?? '');
    });
  }

  /** The running process of a container, to run commands in (undefined while it does not run). */
  private execTarget(c: ContainerRun): ExecTarget | undefined {
    return c.proc?.pid && c.process ? { pid: c.proc.pid, spec: c.process } : undefined;
  }

  /**
   * `kubectl exec` into one of this node's pods: the session that runs the command in the
   * container (as its user, with its env, in its namespaces), or the StatusError that says why
   * it cannot (the container is not running).
   */
  prepareExec(pod: KubeObject, request: ExecRequest): ExecSession {
    const run = this.pods.get(pod.metadata.uid!);
    const c = run?.containers.get(request.container);
    const target = c && this.execTarget(c);
    if (!c || !target) {
      const waiting = c?.state?.waiting?.reason ?? run?.waiting?.reason ?? (c?.state?.terminated ? 'Terminated' : '');
      throw new StatusError(
        400,
        'BadRequest',
        `container ${request.container} of pod ${pod.metadata.namespace}/${pod.metadata.name} is not running` +
          `${waiting ? ` (${waiting})` : ''}: exec needs a running container`,
      );
    }
    return execSession(target, request, c.execs);
  }

  /** Stops every pod at once (the cluster is shutting down). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    if (this.tick) clearInterval(this.tick);
    await Promise.all(
      [...this.pods.values()].map(async (run) => {
        run.terminating = true;
        run.gone = true;
        await Promise.all([...run.containers.values()].map((c) => this.stopContainer(c, 2)));
        run.tokenTimers.forEach(clearInterval);
        if (run.statusTimer) clearTimeout(run.statusTimer);
        await this.removeSandbox(run, true).catch(() => undefined);
        rmSync(run.podDir, { recursive: true, force: true });
      }),
    );
    this.pods.clear();
  }

  /** Writes the pod's status soon (changes in one burst make one write). */
  private pushStatus(run: PodRun, finalPhase?: 'Succeeded' | 'Failed'): void {
    if (finalPhase) run.finalPhase = finalPhase;
    run.statusTimer ??= setTimeout(() => {
      run.statusTimer = undefined;
      if (run.gone || this.stopped) return;
      const pod = this.o.objects.get('pods', run.pod.metadata.namespace, run.pod.metadata.name!);
      if (!pod || pod.metadata.uid !== run.uid) return;
      this.o.objects.updateStatus('pods', pod.metadata.namespace, pod.metadata.name!, this.status(run, pod));
    }, 10);
  }

  private status(run: PodRun, pod: KubeObject): any {
    return podStatus(run, pod, this.o.node, this.o.network.hostIP);
  }

  private event(run: PodRun, type: 'Normal' | 'Warning', reason: string, message: string): void {
    try {
      recordPodEvent(this.o.objects, run.pod, this.o.node, type, reason, message);
    } catch (e) {
      this.log.debug({ err: e }, 'event not recorded');
    }
  }
}
