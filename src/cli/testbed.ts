import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { CommandSpec } from './args.js';

/**
 * The testbed's commands (demo, emulate ...), for users on one machine. The product never imports
 * the testbed: it is loaded by path, from the build beside this one (dist/testbed next to
 * dist/src), and is absent from the image and from an install without the testbed.
 */
const ENTRY = new URL('../../testbed/cli/commands.js', import.meta.url);

/** Names and summaries of the testbed's commands, for help and for a clear error when it is absent. */
export const TESTBED_SUMMARIES: ReadonlyArray<{ name: string; summary: string }> = [
  { name: 'demo', summary: 'Run the whole system on this machine against the emulators (testbed).' },
  { name: 'emulate ecs', summary: 'Serve an emulated ECS/VPC OpenAPI (testbed).' },
  { name: 'emulate kube', summary: 'Serve an emulated Kubernetes API server (testbed).' },
  { name: 'emulate cluster', summary: 'Run a local emulated cluster: API server, nodes, kubelets (testbed).' },
];

export const TESTBED_MISSING =
  'this command is part of the testbed (the emulators, the local cluster and the demo), which this installation does not ' +
  'carry: the image and `npm ci --omit=dev` hold the product only. From a clone of the repository: ' +
  '`npm ci && npm run build`, then `./bin/eni-ipam demo`';

/** The testbed's commands; or why they cannot run here (not built, or its packages not installed). */
export async function loadTestbedCommands(): Promise<{ commands: CommandSpec[] } | { why: string }> {
  if (!existsSync(fileURLToPath(ENTRY))) return { why: TESTBED_MISSING };
  try {
    const loaded = (await import(ENTRY.href)) as { TESTBED_COMMANDS: CommandSpec[] };
    return { commands: loaded.TESTBED_COMMANDS };
  } catch (e) {
    // Built, but its packages are gone (`npm ci --omit=dev` after a build): the product's commands still run.
    const why = (e as Error).message.split('\n')[0];
    return {
      why:
        `this command is part of the testbed, which is built here but cannot load (${why}): ` +
        'install its packages with `npm ci` (without --omit=dev), then `npm run build`',
    };
  }
}
