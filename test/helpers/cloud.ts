import { Writable } from 'node:stream';
import { Registry } from 'prom-client';
import {
  createCloudClient,
  staticCredentials,
  type CloudClient,
  type CloudClientOptions,
} from '../../src/cloud/index.js';
import { createLogger, type Logger } from '../../src/observability/logger.js';
import type { EcsEmulator } from '../../testbed/ecs/index.js';
import { DEMO_KEY, REGION } from './ecs.js';

/** A logger whose JSON lines are kept in `lines`. */
export function capturingLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      lines.push(...String(chunk).split('\n').filter(Boolean));
      cb();
    },
  });
  return { logger: createLogger({ level: 'debug' }, stream), lines };
}

export function clientFor(emu: EcsEmulator, o: Partial<CloudClientOptions> = {}): CloudClient & { registry: Registry } {
  const registry = o.registry ?? new Registry();
  const client = createCloudClient({
    region: REGION,
    ecsEndpoint: emu.url,
    vpcEndpoint: emu.url,
    credentials: staticCredentials(DEMO_KEY),
    registry,
    ...o,
  });
  return Object.assign(client, { registry });
}

/** The value of one sample of a metric, summed over the samples whose labels match. */
export async function metricValue(
  registry: Registry,
  name: string,
  labels: Record<string, string> = {},
): Promise<number> {
  const metric = registry.getSingleMetric(name.replace(/_(count|sum|bucket)$/, ''));
  if (!metric) throw new Error(`no metric ${name}`);
  const data = await metric.get();
  return data.values
    .filter(
      (v) =>
        (v as { metricName?: string }).metricName === undefined || (v as { metricName?: string }).metricName === name,
    )
    .filter((v) =>
      Object.entries(labels).every(([k, want]) => String((v.labels as Record<string, unknown>)[k]) === want),
    )
    .reduce((sum, v) => sum + v.value, 0);
}
