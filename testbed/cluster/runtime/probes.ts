/* eslint-disable @typescript-eslint/no-explicit-any */
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { connect } from 'node:net';

export interface ProbeResult {
  ok: boolean;
  /** Why it failed, as the kubelet's Unhealthy events say it. */
  message?: string;
}

/** A probe's port: a number, or the name of one of the container's ports. */
export function probePort(port: number | string, container: any): number {
  if (typeof port === 'number') return port;
  if (/^\d+$/.test(port)) return Number(port);
  const p = (container.ports ?? []).find((x: any) => x.name === port);
  if (!p) throw new Error(`port "${port}" is not one of the container's ports`);
  return p.containerPort;
}

/** Runs a command in the container (its namespaces, root and user) to completion. */
export type ProbeExec = (
  argv: string[],
  timeoutMs: number,
) => Promise<{ code: number; output: string; timedOut: boolean }>;

/**
 * Runs one probe as the kubelet does: httpGet (2xx or 3xx), tcpSocket (a connection) at the
 * pod's address, or exec (exit 0) inside the container (`exec`: undefined while it is not running).
 */
export function runProbe(probe: any, container: any, podIP: string, exec: ProbeExec | undefined): Promise<ProbeResult> {
  const timeoutMs = (probe.timeoutSeconds ?? 1) * 1000;
  if (probe.httpGet) {
    const g = probe.httpGet;
    let port: number;
    try {
      port = probePort(g.port, container);
    } catch (e) {
      return Promise.resolve({ ok: false, message: (e as Error).message });
    }
    const host = g.host ?? podIP;
    const scheme = (g.scheme ?? 'HTTP').toUpperCase();
    return new Promise((resolve) => {
      const headers: Record<string, string> = { 'user-agent': 'kube-probe/1.32', accept: '*/*' };
      for (const h of g.httpHeaders ?? []) headers[h.name] = h.value;
      const req = (scheme === 'HTTPS' ? httpsRequest : httpRequest)(
        { host, port, path: g.path ?? '/', method: 'GET', headers, timeout: timeoutMs, rejectUnauthorized: false },
        (res) => {
          res.resume();
          const code = res.statusCode ?? 0;
          resolve(
            code >= 200 && code < 400
              ? { ok: true }
              : { ok: false, message: `HTTP probe failed with statuscode: ${code}` },
          );
        },
      );
      req.on('timeout', () =>
        req.destroy(new Error('context deadline exceeded (Client.Timeout exceeded while awaiting headers)')),
      );
      req.on('error', (e) =>
        resolve({
          ok: false,
          message: `Get "${scheme.toLowerCase()}://${host}:${port}${g.path ?? '/'}": ${e.message}`,
        }),
      );
      req.end();
    });
  }
  if (probe.tcpSocket) {
    let port: number;
    try {
      port = probePort(probe.tcpSocket.port, container);
    } catch (e) {
      return Promise.resolve({ ok: false, message: (e as Error).message });
    }
    const host = probe.tcpSocket.host ?? podIP;
    return new Promise((resolve) => {
      const s = connect({ host, port, timeout: timeoutMs });
      s.on('connect', () => {
        s.destroy();
        resolve({ ok: true });
      });
      s.on('timeout', () => {
        s.destroy();
        resolve({ ok: false, message: `dial tcp ${host}:${port}: i/o timeout` });
      });
      s.on('error', (e) => resolve({ ok: false, message: `dial tcp ${host}:${port}: ${e.message}` }));
    });
  }
  if (probe.exec) {
    if (!exec) return Promise.resolve({ ok: false, message: 'the container is not running' });
    return exec(probe.exec.command ?? [], timeoutMs).then((r) =>
      r.code === 0
        ? { ok: true }
        : {
            ok: false,
            message: r.timedOut ? 'command timed out' : r.output.trim() || `command exited with ${r.code}`,
          },
    );
  }
  return Promise.resolve({ ok: false, message: 'the probe has no handler (httpGet, tcpSocket or exec)' });
}
