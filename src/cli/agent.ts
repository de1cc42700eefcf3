import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { Registry } from 'prom-client';
import { Agent } from '../agent/agent.js';
import { SocketInUseError, clearStaleSocket, serveAgentApi } from '../agent/api.js';
import { DEFAULT_SOCKET } from '../agent/cni.js';
import { ConflistByMode } from '../agent/conflist.js';
import { DEFAULT_POD_EVENT_POLICY, podEventPolicy } from '../agent/pod-events.js';
import { IpRouteKernel } from '../agent/datapath/kernel.js';
import { DEFAULT_TABLE_BASE, MAX_DEVICE_INDEX } from '../agent/datapath/model.js';
import { StateFileError } from '../agent/state-file.js';
import { StateDirLockedError, StateLock } from '../agent/state-lock.js';
import { createLogger, servingLogger } from '../observability/logger.js';
import { collectProcessMetrics } from '../observability/process-metrics.js';
import { addressFlag, serveOnAddressFlags } from './addresses.js';
import { exitOnUnhandledErrors } from './fatal.js';
import { type CommandSpec, LOG_LEVEL_FLAG, UsageError, loadKubeconfig, timerSeconds, untilSignal } from './args.js';

/** A group id, or a group name looked up in /etc/group. */
function groupId(group: string): number {
  if (/^\d+$/.test(group)) return Number(group);
  let text = '';
  try {
    text = readFileSync('/etc/group', 'utf8');
  } catch {
    // no group database: only ids work
  }
  const line = text.split('\n').find((l) => l.split(':')[0] === group);
  if (!line)
    throw new UsageError(
      `--socket-group ${group}: no such group in /etc/group; give a group name of this host or a numeric id`,
    );
  return Number(line.split(':')[2]);
}

/** --cni-conf-dir with both conflists, checked before anything starts; undefined without it. */
function conflistFlags(f: Record<string, unknown>, logger: Logger): ConflistByMode | undefined {
  const confDir = f['cni-conf-dir'] as string | undefined;
  const shared = f['shared-conflist'] as string | undefined;
  const exclusive = f['exclusive-conflist'] as string | undefined;
  if (confDir === undefined) {
    if (shared !== undefined || exclusive !== undefined)
      throw new UsageError(
        '--shared-conflist and --exclusive-conflist go with --cni-conf-dir, the folder to install in',
      );
    return undefined;
  }
  if (shared === undefined || exclusive === undefined)
    throw new UsageError(
      '--cni-conf-dir needs --shared-conflist and --exclusive-conflist: the conflist of each eniMode',
    );
  try {
    return new ConflistByMode({
      confDir,
      sources: { Shared: shared, Exclusive: exclusive },
      logger,
      node: String(f.node),
    });
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}

export const agentCommand: CommandSpec = {
  name: 'agent',
  summary: 'Run the node agent: hand the node’s ENIPool IPs to pods over a unix socket (for eni-ipam-cni).',
  flags: [
    {
      name: 'node',
      type: 'string',
      value: 'NAME',
      default: process.env.NODE_NAME,
      help: 'this node’s name (default: $NODE_NAME)',
    },
    {
      name: 'kubeconfig',
      type: 'string',
      value: 'FILE',
      help: 'kubeconfig to use (in-cluster configuration when absent)',
    },
    {
      name: 'state-dir',
      type: 'string',
      value: 'DIR',
      default: '/var/lib/eni-ipam',
      help: 'where allocations are kept across restarts',
    },
    {
      name: 'socket',
      type: 'string',
      value: 'PATH',
      default: DEFAULT_SOCKET,
      help: 'unix socket of the local API (mode 0600)',
    },
    {
      name: 'socket-group',
      type: 'string',
      value: 'GROUP',
      help: 'also let this group (name or id) use the socket: mode 0660',
    },
    {
      name: 'cooldown',
      type: 'number',
      value: 'SECONDS',
      default: 30,
      help: 'how long a released IP rests before reuse',
      check: timerSeconds({ zero: true }),
    },
    {
      name: 'status-interval',
      type: 'number',
      value: 'SECONDS',
      default: 1,
      help: 'status writes are coalesced to at most one per interval',
      check: timerSeconds(),
    },
    {
      name: 'node-routing',
      type: 'boolean',
      default: true,
      help:
        'set up the node’s datapath: ENI devices up with --mtu, a route table per ENI, two rules per pod address; ' +
        '--node-routing=false is for tests and debugging only (pods on secondary ENIs then cannot reach the VPC)',
    },
    {
      name: 'mtu',
      type: 'number',
      value: 'BYTES',
      default: 1500,
      help: 'MTU of the ENI devices (the chart passes agent.mtu, which the pods’ veths use too)',
      check: (v) =>
        Number.isInteger(v) && Number(v) >= 576 && Number(v) <= 65535
          ? undefined
          : 'must be an integer from 576 to 65535',
    },
    {
      name: 'route-table-base',
      type: 'number',
      value: 'N',
      default: DEFAULT_TABLE_BASE,
      help: `the ENI with device index I gets route table N+I (N itself: the primary ENI’s IPv6); tables N to N+${MAX_DEVICE_INDEX} are the agent’s`,
      check: (v) =>
        Number.isInteger(v) && Number(v) >= 255 && Number(v) + MAX_DEVICE_INDEX <= 0x7fffffff
          ? undefined
          : `must be an integer from 255 to ${0x7fffffff - MAX_DEVICE_INDEX} (tables 253 to 255 are the kernel’s)`,
    },
    {
      name: 'device-timeout',
      type: 'number',
      value: 'SECONDS',
      default: 5,
      help: 'how long an ADD waits for its ENI’s device to appear; keep it below the plugin’s ipam.timeoutSeconds (10)',
      check: (v) => (Number(v) > 0 ? undefined : 'must be greater than 0'),
    },
    {
      name: 'pod-event-interval',
      type: 'number',
      value: 'SECONDS',
      default: DEFAULT_POD_EVENT_POLICY.intervalMs / 1000,
      help: 'a pod that waits for an address is told why in an Event at once, then again at most this often (repeats fold into its count)',
      check: (v) => (Number(v) > 0 && Number(v) <= 3600 ? undefined : 'must be greater than 0 and at most 3600'),
    },
    {
      name: 'cni-conf-dir',
      type: 'string',
      value: 'DIR',
      help:
        'keep the conflist in this host CNI folder to the pool’s eniMode: --shared-conflist or --exclusive-conflist, ' +
        'installed under the first’s file name (the chart passes its ConfigMap’s two files)',
    },
    {
      name: 'shared-conflist',
      type: 'string',
      value: 'FILE',
      help: 'with --cni-conf-dir: the conflist of Shared pools',
    },
    {
      name: 'exclusive-conflist',
      type: 'string',
      value: 'FILE',
      help: 'with --cni-conf-dir: the conflist of Exclusive pools',
    },
    addressFlag('metrics-addr', '0.0.0.0:9091', 'serve /metrics here'),
    addressFlag('health-addr', '0.0.0.0:8081', 'serve /healthz and /readyz (pool seen) here'),
    LOG_LEVEL_FLAG,
  ],
  async run(f) {
    if (!f.node) throw new UsageError('--node is required (or set NODE_NAME)');
    const socketGid = f['socket-group'] === undefined ? undefined : groupId(String(f['socket-group']));
    const logger = createLogger({ level: String(f['log-level']), name: 'eni-ipam-agent' });
    const cniConf = conflistFlags(f, logger);
    exitOnUnhandledErrors(logger, 'agent');
    const kc = new KubeConfig();
    loadKubeconfig(kc, f.kubeconfig as string | undefined);
    // One agent per node: the state directory is locked, and a live agent's socket is left alone,
    // before anything reads the state or touches the socket. Exit 1: nothing is wrong with the
    // command, the node is busy; it works once the other agent is gone.
    const stateDir = String(f['state-dir']);
    let lock: StateLock;
    try {
      lock = await StateLock.take(stateDir, {
        node: String(f.node),
        socket: String(f.socket),
        pod: process.env.POD_NAME ? `${process.env.POD_NAMESPACE ?? 'default'}/${process.env.POD_NAME}` : undefined,
        host: hostname(),
        pid: process.pid,
        since: new Date().toISOString(),
      });
    } catch (e) {
      if (!(e instanceof StateDirLockedError)) throw e;
      process.stderr.write(`eni-ipam agent: ${e.message}\n`);
      return 1;
    }
    try {
      await clearStaleSocket(String(f.socket));
    } catch (e) {
      await lock.release();
      if (!(e instanceof SocketInUseError))
        throw new UsageError(`--socket ${String(f.socket)}: ${(e as Error).message}`);
      process.stderr.write(`eni-ipam agent: ${e.message}\n`);
      return 1;
    }
    const lost = new Promise<void>((resolve) => lock.onLost(resolve));
    const registry = new Registry();
    collectProcessMetrics(registry);
    let agent: Agent | undefined = undefined;
    const endpoints = await serveOnAddressFlags(f, registry, { live: () => true, ready: () => !!agent?.ready });
    try {
      agent = new Agent({
        kc,
        node: String(f.node),
        stateDir,
        cooldownMs: (f.cooldown as number) * 1000,
        statusIntervalMs: (f['status-interval'] as number) * 1000,
        podEvents: podEventPolicy((f['pod-event-interval'] as number) * 1000),
        ...(cniConf ? { cniConf } : {}),
        logger,
        registry,
        ...(f['node-routing']
          ? {
              datapath: {
                config: { tableBase: f['route-table-base'] as number, mtu: f.mtu as number },
                kernel: new IpRouteKernel(),
                deviceTimeoutMs: (f['device-timeout'] as number) * 1000,
              },
            }
          : {}),
      });
    } catch (e) {
      endpoints.close();
      await lock.release();
      if (e instanceof StateFileError) throw new UsageError(e.message);
      throw e;
    }
    await agent.start();
    let api: Awaited<ReturnType<typeof serveAgentApi>>;
    try {
      api = await serveAgentApi(agent, String(f.socket), { socketGid });
    } catch (e) {
      await agent.stop();
      endpoints.close();
      await lock.release();
      throw new UsageError(`cannot serve on --socket ${String(f.socket)}: ${(e as Error).message}`);
    }
    servingLogger(logger).info(
      { node: f.node, socket: f.socket, metrics: endpoints.metricsUrl, health: endpoints.healthUrl },
      'serving',
    );
    const why = await Promise.race([untilSignal(), lost.then(() => 'lost' as const)]);
    if (why === 'lost')
      logger.error(
        { node: f.node, lock: stateDir },
        'the state directory lock was lost (its flock process was killed); stopping, so that no second agent shares the state',
      );
    api.close();
    await agent.stop();
    endpoints.close();
    await lock.release();
    return why === 'lost' ? 1 : 0;
  },
};
