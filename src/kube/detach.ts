/**
 * V8 makes a string read by JSON.parse a slice of the whole response body when it is 13
 * characters or longer (an ENI id, a MAC, an IP, a timestamp), and a slice keeps its parent
 * alive. An object kept in a cache would then pin the entire list or page it came from:
 * at 5,000 nodes, about 50 MiB of old DescribeNetworkInterfaces pages in the operator.
 * Caches pass what they keep through here: every long string gets its own memory.
 */
export function detachStrings<T>(value: T): T {
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) value[i] = own(value[i]);
  } else if (value && typeof value === 'object') {
    const o = value as Record<string, unknown>;
    for (const k of Object.keys(o)) o[k] = own(o[k]);
  }
  return value;
}

function own(v: unknown): unknown {
  if (typeof v === 'string') return v.length < 13 ? v : Buffer.from(v, 'utf8').toString('utf8');
  return typeof v === 'object' && v !== null ? detachStrings(v) : v;
}
