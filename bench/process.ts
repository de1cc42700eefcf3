import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';

/** The first lines a process prints (once it serves); its exit before that, or silence for 30 s, is an error. */
export async function firstLines(child: ChildProcess, what: string, n: number): Promise<string[]> {
  const lines = createInterface({ input: child.stdout! });
  const got: string[] = [];
  return Promise.race([
    new Promise<string[]>((resolve) => lines.on('line', (l) => got.push(l) === n && resolve(got))),
    once(child, 'exit').then(([code]) => {
      throw new Error(`the ${what} exited with ${code} before it served`);
    }),
    new Promise<string[]>((_, reject) =>
      setTimeout(() => reject(new Error(`the ${what} did not serve within 30 s`)), 30_000).unref(),
    ),
  ]);
}

/**
 * `eni-ipam operator` against the emulators: its kubeconfig, the ECS emulator as both OpenAPI
 * endpoints, metrics and health on free ports. Callers add what differs (leader election, log
 * level, rates).
 */
export function operatorArgs(o: { kubeconfig: string; ecs: string; clusterId: string; vpcId: string }): string[] {
  return [
    'operator',
    ...['--kubeconfig', o.kubeconfig, '--region', 'cn-hangzhou', '--vpc-id', o.vpcId, '--cluster-id', o.clusterId],
    ...['--ecs-endpoint', o.ecs, '--vpc-endpoint', o.ecs],
    ...['--metrics-addr', '127.0.0.1:0', '--health-addr', '127.0.0.1:0'],
  ];
}

/** `eni-ipam agent` for one node: its kubeconfig, state folder and socket; metrics and health on free ports. */
export function agentArgs(o: { node: string; kubeconfig: string; stateDir: string; socket: string }): string[] {
  return [
    'agent',
    ...['--node', o.node, '--kubeconfig', o.kubeconfig, '--state-dir', o.stateDir, '--socket', o.socket],
    ...['--metrics-addr', '127.0.0.1:0', '--health-addr', '127.0.0.1:0'],
  ];
}
