import { isIPv4, isIPv6 } from 'node:net';
import type { Registry } from 'prom-client';
import { ListenError, serveMetricsAndHealth, type HealthChecks, type ListenAddress } from '../observability/http.js';
import { UsageError, type FlagSpec, type FlagValues } from './args.js';

// RFC 1123 host names: dot-separated labels of letters, digits and inner hyphens.
const HOST_NAME = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/i;

/**
 * Reads HOST:PORT: an IPv4 address, a host name or a bracketed IPv6 address, then a port from
 * 0 to 65535 (0 picks a free port). An empty host (`:9090`, as Go programs take it) is every
 * IPv4 interface. Answers why the text is not one when it is not.
 */
export function parseHostPort(text: string): ListenAddress | { error: string } {
  const colon = text.lastIndexOf(':');
  if (colon < 0) return { error: `"${text}" has no port` };
  let host = text.slice(0, colon);
  const port = text.slice(colon + 1);
  if (host.startsWith('[') && host.endsWith(']')) {
    host = host.slice(1, -1);
    if (!isIPv6(host)) return { error: `"[${host}]" is not an IPv6 address` };
  } else if (host.includes(':')) return { error: `"${text}" has an IPv6 address without brackets` };
  else if (host === '') host = '0.0.0.0';
  // Four numbers are meant as an IPv4 address, even when they are not one (300.1.2.3).
  else if (!(isIPv4(host) || (HOST_NAME.test(host) && !/^[\d.]+$/.test(host))))
    return { error: `"${host}" is not an IPv4 address, a host name or a bracketed IPv6 address` };
  if (!/^\d{1,5}$/.test(port) || Number(port) > 65535)
    return { error: `the port "${port}" is not a number from 0 to 65535` };
  return { host, port: Number(port) };
}

/** The address a flag holds, once parseFlags has checked it. */
export function addressOf(text: unknown): ListenAddress {
  const parsed = parseHostPort(String(text));
  if ('error' in parsed) throw new Error(`not a checked address: ${parsed.error}`);
  return parsed;
}

/** A HOST:PORT flag, checked when flags are parsed; the error shows the default and its IPv6 form as examples. */
export function addressFlag(name: string, defaultAddress: string, help: string): FlagSpec {
  const port = defaultAddress.slice(defaultAddress.lastIndexOf(':') + 1);
  const v6 = defaultAddress.startsWith('0.0.0.0:') ? '::' : '::1';
  return {
    name,
    type: 'string',
    value: 'HOST:PORT',
    default: defaultAddress,
    help,
    check: (v) => {
      const parsed = parseHostPort(String(v));
      return 'error' in parsed
        ? `takes HOST:PORT (for example ${defaultAddress} or [${v6}]:${port}): ${parsed.error}`
        : undefined;
    },
  };
}

/** What to do about an address this host refuses to listen on, by the error's code. */
const REMEDIES: Record<string, string> = {
  EADDRINUSE: 'the address is already in use by another listener; pick another port or stop what listens there',
  EADDRNOTAVAIL: 'no interface of this host has that address; use one of its addresses, or 0.0.0.0 for all of them',
  EACCES: 'permission denied; ports below 1024 need root or CAP_NET_BIND_SERVICE, so pick a port from 1024',
  EAFNOSUPPORT: 'this host has no IPv6; use an IPv4 address',
  ENOTFOUND: 'the host name does not resolve; give an IP address or a name of this host',
  EAI_AGAIN: 'the host name could not be resolved now; give an IP address',
};

/**
 * A failure to listen on the address of a flag, as a usage error (one line, exit 2) when the
 * address is the reason; any other failure is not the user's and is answered undefined.
 */
export function listenFailure(flag: string, address: string, e: unknown): UsageError | undefined {
  const remedy = REMEDIES[(e as NodeJS.ErrnoException | undefined)?.code ?? ''];
  return remedy ? new UsageError(`--${flag} ${address}: ${remedy}`) : undefined;
}

/**
 * Listens on `--metrics-addr` and `--health-addr` (of the operator and the agent). Called before
 * anything else starts, so that an address this host refuses is one line and exit 2, not a
 * failure after the caches, the lease and the cloud client are up.
 */
export async function serveOnAddressFlags(flags: FlagValues, registry: Registry, checks: HealthChecks) {
  try {
    return await serveMetricsAndHealth(
      addressOf(flags['metrics-addr']),
      addressOf(flags['health-addr']),
      registry,
      checks,
    );
  } catch (e) {
    if (!(e instanceof ListenError)) throw e;
    const metrics = addressOf(flags['metrics-addr']);
    // Our own metrics listener holds the port: 0.0.0.0:9090 covers 127.0.0.1:9090, say.
    if (e.role === 'health' && e.cause.code === 'EADDRINUSE' && e.address.port === metrics.port && metrics.port !== 0)
      throw new UsageError(
        `--health-addr ${String(flags['health-addr'])}: overlaps --metrics-addr ${String(flags['metrics-addr'])}; ` +
          'give both the same address to serve them together, or different ports',
      );
    const flag = `${e.role}-addr`;
    throw listenFailure(flag, String(flags[flag]), e.cause) ?? e;
  }
}
