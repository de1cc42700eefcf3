import type { KubeConfig } from '@kubernetes/client-node';
/** A wrong flag or value: the CLI prints the one-line message and exits 2. */
export class UsageError extends Error {}

type Check = (v: string | number) => string | undefined;
export const positive: Check = (v) => (Number(v) > 0 ? undefined : 'must be greater than 0');
export const nonNegative: Check = (v) => (Number(v) >= 0 ? undefined : 'must be 0 or more');
/** Node's timers hold at most 2^31-1 ms (24.8 days): a longer one fires at once, over and over. */
export const MAX_TIMER_SECONDS = 2_147_483;
/** A duration a timer waits for: more than 0 (or 0 with `zero`), and no longer than a timer holds. */
export const timerSeconds =
  (o: { zero?: boolean } = {}): Check =>
  (v) =>
    (o.zero ? nonNegative : positive)(v) ??
    (Number(v) > MAX_TIMER_SECONDS
      ? `must be at most ${MAX_TIMER_SECONDS} (24.8 days: a longer timer does not hold)`
      : undefined);

export interface FlagSpec {
  name: string;
  type: 'string' | 'number' | 'boolean';
  help: string;
  default?: string | number | boolean;
  /** Placeholder for the value in help, e.g. FILE. */
  value?: string;
  choices?: readonly string[];
  /** Returns why a value is wrong, or undefined. */
  check?: (v: string | number) => string | undefined;
}

export interface CommandSpec {
  /** Words after `eni-ipam`, e.g. `emulate ecs`. */
  name: string;
  summary: string;
  description?: string;
  flags: FlagSpec[];
  /** Checks the flags together once each is parsed: returns why they do not fit, naming them, or undefined. */
  validate?(flags: FlagValues): string | undefined;
  run(flags: Record<string, string | number | boolean | undefined>): Promise<number>;
}

/** `--log-level`, the same for every long-running command. */
export const LOG_LEVEL_FLAG: FlagSpec = {
  name: 'log-level',
  type: 'string',
  value: 'LEVEL',
  default: 'info',
  choices: ['debug', 'info', 'warn', 'error'],
  help: 'log level',
};

export type FlagValues = Record<string, string | number | boolean | undefined>;

/** Parses `--name value`, `--name=value`, `--flag` and `--no-flag`; no positionals. */
export function parseFlags(cmd: CommandSpec, argv: string[]): FlagValues {
  const out: FlagValues = {};
  for (const f of cmd.flags) out[f.name] = f.default;
  const hint = `(see eni-ipam ${cmd.name} --help)`;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('--')) throw new UsageError(`unexpected argument "${arg}" ${hint}`);
    const eq = arg.indexOf('=');
    let name = eq > 0 ? arg.slice(2, eq) : arg.slice(2);
    let inline: string | undefined = eq > 0 ? arg.slice(eq + 1) : undefined;
    let flag = cmd.flags.find((f) => f.name === name);
    if (!flag && name.startsWith('no-')) {
      const positive = cmd.flags.find((f) => f.name === name.slice(3) && f.type === 'boolean');
      if (positive && inline === undefined) {
        flag = positive;
        name = positive.name;
        inline = 'false';
      }
    }
    if (!flag) throw new UsageError(`unknown flag --${name} ${hint}`);
    let raw: string;
    if (flag.type === 'boolean') {
      raw = inline ?? 'true';
      if (raw !== 'true' && raw !== 'false') throw new UsageError(`--${name} takes true or false, not "${raw}"`);
      out[name] = raw === 'true';
      continue;
    }
    if (inline !== undefined) raw = inline;
    else {
      const next = argv[i + 1];
      if (next === undefined || next.startsWith('--'))
        throw new UsageError(`--${name} needs a value ${flag.value ?? ''}`.trimEnd());
      raw = next;
      i++;
    }
    if (flag.choices && !flag.choices.includes(raw))
      throw new UsageError(`--${name} must be one of ${flag.choices.join(', ')}, not "${raw}"`);
    let value: string | number = raw;
    if (flag.type === 'number') {
      value = Number(raw);
      if (raw.trim() === '' || !Number.isFinite(value)) throw new UsageError(`--${name} takes a number, not "${raw}"`);
    }
    const why = flag.check?.(value);
    if (why) throw new UsageError(`--${name} ${why}`);
    out[name] = value;
  }
  const why = cmd.validate?.(out);
  if (why) throw new UsageError(why);
  return out;
}

export function formatHelp(cmd: CommandSpec): string {
  const rows = cmd.flags.map((f) => {
    const left = `  --${f.name}${f.type === 'boolean' ? '' : ` ${f.value ?? f.type.toUpperCase()}`}`;
    const def = f.default === undefined ? '' : ` (default ${String(f.default)})`;
    const choices = f.choices ? ` [${f.choices.join('|')}]` : '';
    return `${left.padEnd(32)} ${f.help}${choices}${def}`;
  });
  return [
    `Usage: eni-ipam ${cmd.name} [flags]`,
    '',
    cmd.summary,
    ...(cmd.description ? ['', cmd.description] : []),
    '',
    'Flags:',
    ...rows,
    `${'  --help'.padEnd(32)} show this help`,
    '',
  ].join('\n');
}

/** Resolves when the process is asked to stop (SIGINT or SIGTERM). */
export function untilSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const on = (sig: NodeJS.Signals) => {
      process.off('SIGINT', on);
      process.off('SIGTERM', on);
      resolve(sig);
    };
    process.on('SIGINT', on);
    process.on('SIGTERM', on);
  });
}

/** The kubeconfig file given, or the in-cluster configuration; a file that cannot be read is a usage error. */
export function loadKubeconfig(kc: KubeConfig, path: string | undefined): void {
  if (!path) return kc.loadFromCluster();
  try {
    kc.loadFromFile(path);
  } catch (e) {
    throw new UsageError(
      `--kubeconfig ${path}: ${(e as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (e as Error).message}`,
    );
  }
}
