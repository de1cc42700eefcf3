import { UsageError, formatHelp, parseFlags, type CommandSpec } from './args.js';
import { emulateEcs } from './emulate-ecs.js';
import { emulateCluster } from './emulate-cluster.js';
import { emulateKube } from './emulate-kube.js';
import { operatorCommand } from './operator.js';
import { agentCommand } from './agent.js';
import { demoCommand } from './demo.js';
import { installCniCommand } from './install-cni.js';

const COMMANDS: CommandSpec[] = [
  demoCommand,
  operatorCommand,
  agentCommand,
  installCniCommand,
  emulateEcs,
  emulateKube,
  emulateCluster,
];

function topHelp(): string {
  const rows = COMMANDS.map((c) => `  ${c.name.padEnd(16)} ${c.summary}`);
  return [
    'Usage: eni-ipam <command> [flags]',
    '',
    'ENI IPAM for Kubernetes on Alibaba Cloud.',
    '',
    'Commands:',
    ...rows,
    '',
    'Run eni-ipam <command> --help for its flags.',
    '',
  ].join('\n');
}

/** Runs the CLI and returns the process exit code (2 for a usage error). */
export async function run(argv: string[]): Promise<number> {
  if (argv.length === 0 || argv[0] === '--help' || argv[0] === '-h' || argv[0] === 'help') {
    process.stdout.write(topHelp());
    return argv.length === 0 ? 2 : 0;
  }
  // The longest command name that prefixes argv wins (`emulate ecs` before `emulate`).
  const cmd = [...COMMANDS]
    .sort((a, b) => b.name.split(' ').length - a.name.split(' ').length)
    .find((c) => c.name.split(' ').every((w, i) => argv[i] === w));
  if (!cmd) {
    const group = COMMANDS.filter((c) => c.name.startsWith(`${argv[0]} `));
    const known = group.length ? group.map((c) => c.name).join(', ') : COMMANDS.map((c) => c.name).join(', ');
    process.stderr.write(
      `eni-ipam: unknown command "${argv.slice(0, group.length ? 2 : 1).join(' ')}" (commands: ${known})\n`,
    );
    return 2;
  }
  const rest = argv.slice(cmd.name.split(' ').length);
  if (rest.includes('--help') || rest.includes('-h')) {
    process.stdout.write(formatHelp(cmd));
    return 0;
  }
  try {
    return await cmd.run(parseFlags(cmd, rest));
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`eni-ipam ${cmd.name}: ${e.message}\n`);
      return 2;
    }
    throw e;
  }
}
