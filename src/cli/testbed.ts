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

/** The testbed's commands, or undefined when the testbed is not installed here. */
export async function loadTestbedCommands(): Promise<CommandSpec[] | undefined> {
  if (!existsSync(fileURLToPath(ENTRY))) return undefined;
  const loaded = (await import(ENTRY.href)) as { TESTBED_COMMANDS: CommandSpec[] };
  return loaded.TESTBED_COMMANDS;
}
