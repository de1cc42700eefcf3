import { Registry } from 'prom-client';
import { silentLogger, type Logger } from '../observability/logger.js';
import type { CredentialsProvider } from './credentials.js';
import { EcsApi } from './ecs.js';
import { ActionLimiters, type ActionLimit } from './limits.js';
import { OpenApiMetrics } from './metrics.js';
import { DEFAULT_RETRY, type RetryPolicy } from './retry.js';
import { RpcCaller } from './rpc.js';

export {
  BAD_ANSWER,
  CLIENT_CODES,
  CloudError,
  TRANSPORT_CODES,
  unlessAlreadyUnassigned,
  type CloudErrorKind,
} from './errors.js';
export { EcsApi } from './ecs.js';
export { DEFAULT_API_LIMITS, MUTATING_ACTIONS, type ActionLimit } from './limits.js';
export { DEFAULT_RETRY, type RetryPolicy } from './retry.js';
export * from './credentials.js';
export type * from './types.js';

export interface CloudClientOptions {
  region: string;
  /** Defaults to the region's VPC-internal endpoints (`ecs-vpc.<region>.aliyuncs.com`). */
  ecsEndpoint?: string;
  vpcEndpoint?: string;
  credentials: CredentialsProvider;
  /** Per-action limits overriding the defaults (calls per minute, burst). */
  limits?: Record<string, ActionLimit>;
  /** Multiplies every limit: 0.5 halves them all, 2 doubles them. */
  limitScale?: number;
  retry?: Partial<RetryPolicy>;
  /** Asked right before each mutating call is sent; false keeps it from the cloud (see RpcCallerOptions). */
  mayMutate?: () => boolean;
  registry?: Registry;
  logger?: Logger;
}

export interface CloudClient {
  api: EcsApi;
  limiters: ActionLimiters;
  close(): Promise<void>;
}

export function defaultEndpoints(region: string): { ecs: string; vpc: string } {
  return { ecs: `https://ecs-vpc.${region}.aliyuncs.com`, vpc: `https://vpc-vpc.${region}.aliyuncs.com` };
}

export function createCloudClient(o: CloudClientOptions): CloudClient {
  const limiters = new ActionLimiters(o.limits, o.limitScale ?? 1);
  const metrics = new OpenApiMetrics(o.registry ?? new Registry(), limiters);
  const retry = { ...DEFAULT_RETRY, ...o.retry };
  const logger = o.logger ?? silentLogger();
  const endpoints = defaultEndpoints(o.region);
  const common = { credentials: o.credentials, limiters, metrics, retry, logger, mayMutate: o.mayMutate };
  const ecs = new RpcCaller({ ...common, endpoint: o.ecsEndpoint ?? endpoints.ecs, apiVersion: '2014-05-26' });
  const vpc = new RpcCaller({ ...common, endpoint: o.vpcEndpoint ?? endpoints.vpc, apiVersion: '2016-04-28' });
  return {
    api: new EcsApi(ecs, vpc, o.region),
    limiters,
    close: () => {
      ecs.closed = true;
      vpc.closed = true;
      return limiters.stop();
    },
  };
}
