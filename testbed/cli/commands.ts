import type { CommandSpec } from '../../src/cli/args.js';
import { demoCommand } from './demo.js';
import { emulateCluster } from './emulate-cluster.js';
import { emulateEcs } from './emulate-ecs.js';
import { emulateKube } from './emulate-kube.js';

/** The commands the testbed adds to `eni-ipam` (src/cli/testbed.ts loads them when this is installed). */
export const TESTBED_COMMANDS: CommandSpec[] = [demoCommand, emulateEcs, emulateKube, emulateCluster];
