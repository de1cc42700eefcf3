import { request, type RequestOptions } from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';

/** An API server's answer: its status and its JSON body (the text where it is not JSON). */
export interface RawAnswer {
  status: number;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/**
 * Requests to the API server with a kubeconfig's credentials, bodies as plain JSON: the kubelet
 * keeps objects as the API serves them (timestamps as strings, every field kept), which
 * client-node's typed models would convert and trim.
 */
export function rawApi(kc: KubeConfig) {
  const server = new URL(kc.getCurrentCluster()!.server);
  return async (method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<RawAnswer> => {
    const opts: RequestOptions = {
      method,
      host: server.hostname.replace(/^\[|\]$/g, ''),
      port: Number(server.port || 443),
      path,
      headers: { accept: 'application/json' },
    };
    await kc.applyToHTTPSOptions(opts);
    return new Promise((resolve, reject) => {
      const req = request(opts, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (text += c));
        res.on('end', () => {
          let parsed: unknown = text;
          try {
            parsed = JSON.parse(text);
          } catch {
            /* kept as text */
          }
          resolve({ status: res.statusCode ?? 0, body: parsed });
        });
      });
      req.setTimeout(30_000, () => req.destroy(new Error(`${method} ${path}: no answer within 30 s`)));
      req.on('error', reject);
      if (body !== undefined) {
        const text = JSON.stringify(body);
        req.setHeader('content-type', contentType);
        req.setHeader('content-length', Buffer.byteLength(text));
        req.end(text);
      } else req.end();
    });
  };
}

export type RawApi = ReturnType<typeof rawApi>;
