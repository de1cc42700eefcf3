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
