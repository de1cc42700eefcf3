import { DEFAULT_API_LIMITS, type ActionLimit } from '../cloud/limits.js';
import { UsageError } from './args.js';

/** `--api-limits CreateNetworkInterface=500:500,DescribeNetworkInterfaces=800` */
export function parseApiLimits(text: string | undefined): Record<string, ActionLimit> {
  const out: Record<string, ActionLimit> = {};
  if (!text) return out;
  for (const part of text.split(',').filter(Boolean)) {
    const m = /^([A-Z][A-Za-z0-9]+)=(\d+(?:\.\d+)?)(?::(\d+))?$/.exec(part.trim());
    if (!m)
      throw new UsageError(
        `--api-limits: "${part}" is not Action=perMinute[:burst] (e.g. CreateNetworkInterface=500:500)`,
      );
    const [, action, perMinute, burst] = m as unknown as [string, string, string, string | undefined];
    // A misspelt action would silently get a bucket of its own that no call uses.
    if (!(action in DEFAULT_API_LIMITS))
      throw new UsageError(
        `--api-limits: unknown action "${action}" (known: ${Object.keys(DEFAULT_API_LIMITS).join(', ')})`,
      );
    if (!(Number(perMinute) > 0))
      throw new UsageError(
        `--api-limits: ${action} must allow more than 0 calls per minute (a limit of 0 would hold its calls forever)`,
      );
    if (burst !== undefined && !(Number(burst) >= 1))
      throw new UsageError(`--api-limits: the burst of ${action} must be at least 1`);
    out[action] = { perMinute: Number(perMinute), burst: burst ? Number(burst) : undefined };
  }
  return out;
}
