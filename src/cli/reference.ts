import { formatHelp, type CommandSpec } from './args.js';

const INTRO = `# Command reference

Generated from the commands' own flag definitions (\`npm run gen:docs\`); a test checks that each
section is exactly what \`eni-ipam <command> --help\` prints. What the commands do is in
[the operator](operator.md), [the agent and the CNI plugin](agent.md) and
[the testbed](../testbed/README.md).

Every command describes its flags with \`--help\`; a wrong flag or value exits 2 with a one-line
message that names it. Flags are checked together before anything starts (the operator's lease
timings, for one). An address (\`--metrics-addr\`, \`--health-addr\`, \`--listen\`) is \`HOST:PORT\`:
an IPv4 address, a host name or a bracketed IPv6 address (\`[::]:9090\`), and a port from 0 to
65535 (0 picks a free one); \`:9090\` is short for \`0.0.0.0:9090\`. An address this host will not
listen on (a port another program holds, an address of no interface here, a port below 1024
without the privilege) is found first, before any cache, lease or cloud call: one line naming
the flag, the address and what to do, exit 2. \`demo\` and \`emulate\` belong to the testbed: they
run from a clone, not from the image.
`;

/** The command reference as Markdown: each command's help, as `--help` prints it. */
export function cliReference(commands: readonly CommandSpec[]): string {
  const sections = commands.map((c) =>
    [`## eni-ipam ${c.name}`, '', c.summary, '', '```text', formatHelp(c).trimEnd(), '```', ''].join('\n'),
  );
  return [INTRO, ...sections].join('\n');
}
