import RPCClient from '@alicloud/pop-core';
import { defaultWorld, startEcsEmulator, type EcsEmulator, type Fixture } from '../../testbed/ecs/index.js';

export const REGION = 'cn-hangzhou';
export const DEMO_KEY = { accessKeyId: 'demo', accessKeySecret: 'demo-secret' };

/** The default world with fast asynchronous transitions, for tests. */
export function fastWorld(patch: (f: Fixture) => void = () => {}): Fixture {
  const f = defaultWorld();
  f.delays = { attachMs: 60, detachMs: 60, deleteMs: 30 };
  patch(f);
  return f;
}

export async function emulator(patch?: (f: Fixture) => void): Promise<EcsEmulator> {
  return startEcsEmulator({ fixture: fastWorld(patch) });
}

/** A raw pop-core client, exactly as a user of the real API would build it. */
export function pop(url: string, version: 'ecs' | 'vpc' = 'ecs', key = DEMO_KEY): RPCClient {
  return new RPCClient({ endpoint: url, apiVersion: version === 'ecs' ? '2014-05-26' : '2016-04-28', ...key });
}

export interface PopFailure {
  code: string;
  status: number;
  data: { RequestId: string; HostId: string; Code: string; Message: string; Recommend: string };
  headers: Record<string, string>;
}

/** Runs a pop-core call that must fail and returns what the caller sees of the failure. */
export async function failure(p: Promise<unknown>): Promise<PopFailure> {
  try {
    await p;
  } catch (e) {
    const err = e as {
      code: string;
      data: PopFailure['data'];
      entry: { response: { statusCode: number; headers: Record<string, string> } };
    };
    return {
      code: err.code,
      status: err.entry?.response?.statusCode,
      data: err.data,
      headers: err.entry?.response?.headers ?? {},
    };
  }
  throw new Error('expected the call to fail');
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `fn` until it returns a truthy value or the timeout passes. */
export async function eventually<T>(fn: () => Promise<T> | T, timeoutMs = 5000, everyMs = 20): Promise<NonNullable<T>> {
  const end = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v as NonNullable<T>;
    } catch (e) {
      // Not there yet (a 404, say): try again until the time is up.
      lastError = e;
    }
    if (Date.now() > end)
      throw new Error(
        `condition not met within ${timeoutMs} ms${lastError ? `; last error: ${(lastError as Error).message}` : ''}`,
      );
    await sleep(everyMs);
  }
}
