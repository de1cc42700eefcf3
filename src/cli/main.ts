import { UsageError, formatHelp, parseFlags, type CommandSpec } from './args.js';
import { operatorCommand } from './operator.js';
import { agentCommand } from './agent.js';
import { installCniCommand } from './install-cni.js';
import { TESTBED_SUMMARIES, loadTestbedCommands } from './testbed.js';

/** The product's commands; the testbed adds its own when it is installed (see testbed.ts). */
export const PRODUCT_COMMANDS: CommandSpec[] = [operatorCommand, agentCommand, installCniCommand];

/** What the CLI offers here: the product's commands, and the testbed's when it is installed. */
interface Commands {
  runnable: CommandSpec[];
  /** The testbed's commands where the testbed cannot run: named in help, refused with why and how to get them. */
  absent: ReadonlyArray<{ name: string; summary: string }>;
  /** Why they cannot run. */
  why?: string;
}

/** Every command this installation has, the product's first. */
export async function commands(): Promise<Commands> {
  const testbed = await loadTestbedCommands();
  return 'commands' in testbed
    ? { runnable: [...PRODUCT_COMMANDS, ...testbed.commands], absent: [] }
    : { runnable: PRODUCT_COMMANDS, absent: TESTBED_SUMMARIES, why: testbed.why };
}

function topHelp({ runnable, absent }: Commands): string {
  const row = (name: string, summary: string) => `  ${name.padEnd(16)} ${summary}`;
  return [
    'Usage: eni-ipam <command> [flags]',
    '',
    'ENI IPAM for Kubernetes on Alibaba Cloud.',
    '',
    'Commands:',
    ...runnable.map((c) => row(c.name, c.summary)),
    ...absent.map((c) => row(c.name, `${c.summary} Not installed here.`)),
    '',
    'Run eni-ipam <command> --help for its flags.',
    '',
  ].join('\n');
}

/** The command whose words prefix argv; the longest wins (`emulate ecs` before `emulate`). */
function matching<T extends { name: string }>(list: readonly T[], argv: string[]): T | undefined {
  return [...list]
    .sort((a, b) => b.name.split(' ').length - a.name.split(' ').length)
    .find((c) => c.name.split(' ').every((w, i) => argv[i] === w));
}

/** Runs the CLI and returns the process exit code (2 for a usage error). */
export async function run(argv: string[]): Promise<number> {
  const available = await commands();
  if (argv.length === 0 || argv[0] === '--help' || argv[0] === '-h' || argv[0] === 'help') {
    process.stdout.write(topHelp(available));
    return argv.length === 0 ? 2 : 0;
  }
  const cmd = matching(available.runnable, argv);
  if (!cmd) {
    const missing =
      matching(available.absent, argv)?.name ??
      (available.absent.some((c) => c.name.startsWith(`${argv[0]} `)) ? argv[0] : undefined);
    if (missing) {
      process.stderr.write(`eni-ipam ${missing}: ${available.why}\n`);
      return 2;
    }
    const all = available.runnable;
    const group = all.filter((c) => c.name.startsWith(`${argv[0]} `));
    const known = (group.length ? group : all).map((c) => c.name).join(', ');
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
