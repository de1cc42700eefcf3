import { formatTaint, parseTaint } from '../kube/taint.js';
import { KubeConfig } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import {
  CredentialsError,
  createCloudClient,
  defaultEndpoints,
  envCredentials,
  fileCredentials,
  oidcRoleCredentials,
  ramRoleCredentials,
  rrsaFromEnv,
  type CredentialsProvider,
} from '../cloud/index.js';
import { DEFAULT_OPERATOR_CONFIG, POOL_APIS, type OperatorMode, type PoolApi } from '../operator/config.js';
import { Operator } from '../operator/operator.js';
import { createLogger, servingLogger } from '../observability/logger.js';
import { collectProcessMetrics } from '../observability/process-metrics.js';
import { addressFlag, serveOnAddressFlags } from './addresses.js';
import { exitOnUnhandledErrors } from './fatal.js';
import {
  type CommandSpec,
  type FlagValues,
  LOG_LEVEL_FLAG,
  UsageError,
  loadKubeconfig,
  positive,
  timerSeconds,
  untilSignal,
} from './args.js';
import { leaderIdentity } from './leader-identity.js';
import { parseApiLimits } from './api-limits.js';

/** An endpoint must be an http(s) URL: pop-core refuses anything else, with a stack trace. */
const url = (v: string | number) => {
  try {
    const u = new URL(String(v));
    if (u.protocol === 'http:' || u.protocol === 'https:') return undefined;
  } catch {
    // not a URL at all
  }
  return `takes an http:// or https:// URL (e.g. https://ecs-vpc.cn-hangzhou.aliyuncs.com), not "${v}"`;
};

function credentials(f: FlagValues): CredentialsProvider {
  if (f['ram-role'])
    return ramRoleCredentials({
      role: String(f['ram-role']),
      metadataEndpoint: f['metadata-endpoint'] as string | undefined,
    });
  if (f['credentials-dir']) return fileCredentials(String(f['credentials-dir']));
  const rrsa = rrsaFromEnv();
  if (rrsa)
    return oidcRoleCredentials({
      ...rrsa,
      stsEndpoint: (f['sts-endpoint'] as string | undefined) ?? `https://sts-vpc.${String(f.region)}.aliyuncs.com`,
    });
  try {
    return envCredentials();
  } catch (e) {
    if (e instanceof CredentialsError) throw new UsageError(e.message);
    throw e;
  }
}

/**
 * The Lease timings fit together as client-go requires: the lease outlasts the renew deadline,
 * and the deadline leaves room for more than one jittered retry (1.2 retry periods). Checked when
 * flags are parsed, before anything starts; the LeaderElector checks them again, as a guard.
 */
export function leaseTimingsProblem(f: FlagValues): string | undefined {
  if (!f['leader-elect']) return undefined;
  const lease = f['leader-elect-lease-duration'] as number;
  const renew = f['leader-elect-renew-deadline'] as number;
  const retry = f['leader-elect-retry-period'] as number;
  if (lease * 1000 <= renew * 1000)
    return `--leader-elect-lease-duration (${lease}) must be longer than --leader-elect-renew-deadline (${renew})`;
  // In milliseconds, as the LeaderElector compares them, so that both agree to the last bit.
  if (renew * 1000 <= retry * 1000 * 1.2)
    return (
      `--leader-elect-renew-deadline (${renew}) must be longer than 1.2 x --leader-elect-retry-period (${retry}), ` +
      `that is more than ${Number((retry * 1.2).toFixed(3))}`
    );
  return undefined;
}

export const operatorCommand: CommandSpec = {
  name: 'operator',
  summary: 'Run the IPAM operator: keep every node’s ENIPool topped up with VPC IPs from ENIs.',
  description:
    'Credentials, first found wins: --ram-role; --credentials-dir; RRSA (ALIBABA_CLOUD_ROLE_ARN, ' +
    'ALIBABA_CLOUD_OIDC_PROVIDER_ARN and ALIBABA_CLOUD_OIDC_TOKEN_FILE, as ACK injects them); ' +
    'ALIBABA_CLOUD_ACCESS_KEY_ID / ALIBABA_CLOUD_ACCESS_KEY_SECRET (and optional ALIBABA_CLOUD_SECURITY_TOKEN).',
  flags: [
    {
      name: 'kubeconfig',
      type: 'string',
      value: 'FILE',
      help: 'kubeconfig to use (in-cluster configuration when absent)',
    },
    { name: 'region', type: 'string', value: 'REGION', help: 'Alibaba Cloud region, e.g. cn-hangzhou (required)' },
    { name: 'vpc-id', type: 'string', value: 'ID', help: 'the cluster’s VPC (required)' },
    {
      name: 'cluster-id',
      type: 'string',
      value: 'ID',
      help: 'tags the ENIs this cluster creates, for ownership and garbage collection (required)',
    },
    {
      name: 'ecs-endpoint',
      type: 'string',
      value: 'URL',
      help: 'ECS OpenAPI endpoint (default: the region’s VPC-internal endpoint)',
      check: url,
    },
    {
      name: 'vpc-endpoint',
      type: 'string',
      value: 'URL',
      help: 'VPC OpenAPI endpoint (default: the region’s VPC-internal endpoint)',
      check: url,
    },
    {
      name: 'credentials-dir',
      type: 'string',
      value: 'DIR',
      help: 'read access-key-id, access-key-secret and security-token from files in DIR (a mounted Secret)',
    },
    {
      name: 'ram-role',
      type: 'string',
      value: 'ROLE',
      help: 'use the ECS RAM role ROLE through the instance metadata service',
    },
    {
      name: 'sts-endpoint',
      type: 'string',
      value: 'URL',
      help: 'STS endpoint for RRSA (default: the region’s VPC-internal sts-vpc endpoint)',
      check: url,
    },
    {
      name: 'metadata-endpoint',
      type: 'string',
      value: 'URL',
      default: 'http://100.100.100.200',
      help: 'instance metadata service (for --ram-role)',
      check: url,
    },
    {
      name: 'mode',
      type: 'string',
      value: 'MODE',
      default: 'normal',
      choices: ['normal', 'no-release', 'read-only'],
      help: 'no-release never unassigns or deletes; read-only makes no mutating cloud call',
    },
    {
      name: 'pool-api',
      type: 'string',
      value: 'API',
      default: 'enipool',
      choices: [...POOL_APIS],
      help: 'where node agents read their pool: enipool (eni-ipam agent) or ciliumnode (cilium-agent --ipam=alibabacloud)',
    },
    {
      name: 'api-limits',
      type: 'string',
      value: 'LIST',
      help: 'per-action limits, Action=perMinute[:burst],... (defaults: Terway’s)',
    },
    {
      name: 'api-limit-scale',
      type: 'number',
      value: 'K',
      default: 1,
      help: 'multiply every per-action limit by K',
      check: positive,
    },
    {
      name: 'workers',
      type: 'number',
      value: 'N',
      default: DEFAULT_OPERATOR_CONFIG.workers,
      help: 'concurrent reconciles',
      check: positive,
    },
    {
      name: 'resync-interval',
      type: 'number',
      value: 'SECONDS',
      default: DEFAULT_OPERATOR_CONFIG.resyncIntervalMs / 1000,
      help: 'full ENI resync period',
      check: timerSeconds(),
    },
    {
      name: 'gc-interval',
      type: 'number',
      value: 'SECONDS',
      default: DEFAULT_OPERATOR_CONFIG.gcIntervalMs / 1000,
      help: 'leaked-ENI garbage collection period',
      check: timerSeconds(),
    },
    {
      name: 'gc-min-age',
      type: 'number',
      value: 'SECONDS',
      default: DEFAULT_OPERATOR_CONFIG.gcMinAgeMs / 1000,
      help: 'a leaked ENI must be this old to be deleted',
      check: timerSeconds({ zero: true }),
    },
    {
      name: 'node-gone-grace',
      type: 'number',
      value: 'SECONDS',
      default: DEFAULT_OPERATOR_CONFIG.nodeGoneGraceMs / 1000,
      help: 'a Node deleted while its instance still exists keeps its ENIs this long',
      check: timerSeconds({ zero: true }),
    },
    {
      name: 'startup-taint',
      type: 'string',
      value: 'KEY[=VALUE]:EFFECT',
      default: formatTaint(DEFAULT_OPERATOR_CONFIG.startupTaint!),
      help:
        'the taint nodes register with (kubelet --register-with-taints) until their pool can serve pods: ' +
        'removed once the pool is first Ready, never added; "" looks for none',
      check: (v) => {
        if (v === '') return undefined;
        try {
          parseTaint(String(v));
          return undefined;
        } catch (e) {
          return (e as Error).message;
        }
      },
    },
    addressFlag('metrics-addr', '0.0.0.0:9090', 'serve /metrics here'),
    addressFlag('health-addr', '0.0.0.0:8080', 'serve /healthz and /readyz here'),
    {
      name: 'leader-elect',
      type: 'boolean',
      default: true,
      help: 'elect a leader on a Lease (--no-leader-elect for a single replica)',
    },
    {
      name: 'leader-elect-lease-name',
      type: 'string',
      value: 'NAME',
      default: 'eni-ipam-operator',
      help: 'Lease name',
    },
    {
      name: 'leader-elect-namespace',
      type: 'string',
      value: 'NS',
      default: process.env.POD_NAMESPACE ?? 'kube-system',
      help: 'Lease namespace',
    },
    {
      name: 'leader-elect-lease-duration',
      type: 'number',
      value: 'SECONDS',
      default: 15,
      help: 'lease duration',
      check: (v) =>
        Number.isInteger(Number(v)) && Number(v) > 0
          ? undefined
          : 'must be whole seconds, more than 0 (the Lease holds it as an integer)',
    },
    {
      name: 'leader-elect-renew-deadline',
      type: 'number',
      value: 'SECONDS',
      default: 10,
      help: 'renew deadline',
      check: positive,
    },
    {
      name: 'leader-elect-retry-period',
      type: 'number',
      value: 'SECONDS',
      default: 2,
      help: 'retry period',
      check: positive,
    },
    LOG_LEVEL_FLAG,
  ],
  validate: leaseTimingsProblem,
  async run(f) {
    for (const req of ['region', 'vpc-id', 'cluster-id']) if (!f[req]) throw new UsageError(`--${req} is required`);
    const limits = parseApiLimits(f['api-limits'] as string | undefined);
    const creds = credentials(f);
    const logger = createLogger({ level: String(f['log-level']), name: 'eni-ipam-operator' });
    exitOnUnhandledErrors(logger, 'operator');
    const kc = new KubeConfig();
    loadKubeconfig(kc, f.kubeconfig as string | undefined);
    const registry = new Registry();
    collectProcessMetrics(registry);
    let operator: Operator | undefined = undefined;
    const endpoints = await serveOnAddressFlags(f, registry, { live: () => true, ready: () => !!operator?.ready });
    const region = String(f.region);
    const client = createCloudClient({
      mayMutate: () => operator?.mayMutate() ?? false,
      region,
      ecsEndpoint: (f['ecs-endpoint'] as string | undefined) ?? defaultEndpoints(region).ecs,
      vpcEndpoint: (f['vpc-endpoint'] as string | undefined) ?? defaultEndpoints(region).vpc,
      credentials: creds,
      limits,
      limitScale: f['api-limit-scale'] as number,
      registry,
      logger,
    });
    const identity = leaderIdentity();
    operator = new Operator({
      kc,
      api: client.api,
      logger,
      registry,
      credentialsSource: creds.source,
      config: {
        ...DEFAULT_OPERATOR_CONFIG,
        clusterId: String(f['cluster-id']),
        vpcId: String(f['vpc-id']),
        mode: f.mode as OperatorMode,
        poolApi: f['pool-api'] as PoolApi,
        workers: f.workers as number,
        resyncIntervalMs: (f['resync-interval'] as number) * 1000,
        gcIntervalMs: (f['gc-interval'] as number) * 1000,
        gcMinAgeMs: (f['gc-min-age'] as number) * 1000,
        nodeGoneGraceMs: (f['node-gone-grace'] as number) * 1000,
        startupTaint: f['startup-taint'] ? parseTaint(String(f['startup-taint'])) : undefined,
      },
      leaderElection: f['leader-elect']
        ? {
            namespace: String(f['leader-elect-namespace']),
            name: String(f['leader-elect-lease-name']),
            identity,
            leaseDurationSeconds: f['leader-elect-lease-duration'] as number,
            renewDeadlineSeconds: f['leader-elect-renew-deadline'] as number,
            retryPeriodSeconds: f['leader-elect-retry-period'] as number,
          }
        : undefined,
    });
    servingLogger(logger).info(
      {
        identity,
        region,
        vpc: f['vpc-id'],
        cluster: f['cluster-id'],
        mode: f.mode,
        poolApi: f['pool-api'],
        credentials: creds.source,
        metrics: endpoints.metricsUrl,
        health: endpoints.healthUrl,
      },
      'serving',
    );
    // Signals are heard while the caches list (which may take long when the API server refuses).
    const signal = untilSignal().then((s) => `signal ${s}`);
    await Promise.race([operator.start(), signal]);
    const reason = await Promise.race([signal, operator.lostLeadership.then(() => 'lost leadership')]);
    logger.info({ reason }, 'operator stopping');
    // A drain may wait on calls to an API server that does not answer: it is bounded.
    const drained = await Promise.race([
      operator.stop().then(() => true),
      new Promise<boolean>((r) => setTimeout(() => r(false), reason === 'lost leadership' ? 5_000 : 30_000).unref()),
    ]);
    if (!drained) logger.warn({ reason }, 'stopping took too long; exiting without a full drain');
    await client.close();
    endpoints.close();
    return reason === 'lost leadership' ? 1 : 0;
  },
};
