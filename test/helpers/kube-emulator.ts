/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { KubeConfig } from '@kubernetes/client-node';
import { startKubeEmulator, type KubeEmulator, type KubeEmulatorOptions } from '../../testbed/kube/index.js';

/** The home-made Kubernetes emulator, for the tests of the emulator itself (going with it). */
export async function kube(opts: KubeEmulatorOptions = {}): Promise<{ emu: KubeEmulator; kc: KubeConfig }> {
  const emu = await startKubeEmulator(opts);
  const kc = new KubeConfig();
  kc.loadFromString(emu.kubeconfig);
  return { emu, kc };
}

/** Raw HTTP against the emulator, for status codes and headers. */
export async function http(
  emu: KubeEmulator,
  method: string,
  path: string,
  body?: unknown,
  contentType = 'application/json',
) {
  const res = await fetch(`${emu.url}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': contentType },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = text;
  }
  return { status: res.status, body: json, headers: res.headers };
}
