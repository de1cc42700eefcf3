import type { RequestOptions } from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';
import { httpsJson, type RestAnswer } from '../../control-plane/https-json.js';

export type RawAnswer = RestAnswer;

/**
 * Requests to the API server with a kubeconfig's credentials, bodies as plain JSON: the kubelet
 * keeps objects as the API serves them (timestamps as strings, every field kept).
 */
export function rawApi(kc: KubeConfig) {
  const server = kc.getCurrentCluster()!.server;
  return async (method: string, path: string, body?: unknown, contentType?: string): Promise<RawAnswer> => {
    const opts: RequestOptions = { method, headers: { accept: 'application/json' } };
    await kc.applyToHTTPSOptions(opts);
    return httpsJson(`${server}${path}`, opts, body, contentType);
  };
}

export type RawApi = ReturnType<typeof rawApi>;
