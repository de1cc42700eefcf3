import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { PRODUCT_COMMANDS } from '../../src/cli/main.js';
import { cliReference } from '../../src/cli/reference.js';
import { TESTBED_SUMMARIES } from '../../src/cli/testbed.js';
import { TESTBED_COMMANDS } from '../../testbed/cli/commands.js';
import { runCli } from '../helpers/cli.js';
import { ROOT } from '../helpers/helm.js';

const DOC = readFileSync(join(ROOT, 'docs/cli.md'), 'utf8');

/** The ```text block under a command's heading in docs/cli.md. */
function documentedHelp(name: string): string | undefined {
  const at = DOC.indexOf(`\n## eni-ipam ${name}\n`);
  if (at < 0) return undefined;
  return /```text\n([\s\S]*?)\n```/.exec(DOC.slice(at))?.[1];
}

describe('docs/cli.md, the command reference', () => {
  it('is what the commands’ flag definitions generate (npm run gen:docs rewrites it)', () => {
    expect(DOC).toBe(cliReference([...PRODUCT_COMMANDS, ...TESTBED_COMMANDS]));
  });

  it('names the testbed’s commands where it is absent as the testbed defines them', () => {
    expect(TESTBED_SUMMARIES.map((c) => c.name)).toEqual(TESTBED_COMMANDS.map((c) => c.name));
  });

  it('documents every command the CLI lists, each exactly as its --help prints it', async () => {
    const top = await runCli(['--help']);
    const names = [...top.stdout.matchAll(/^ {2}(\S+(?: [a-z]+)?)\s{2,}/gm)].map((m) => m[1]!);
    expect(names).toEqual(expect.arrayContaining(['operator', 'agent', 'install-cni', 'demo', 'emulate cluster']));
    expect([...DOC.matchAll(/^## eni-ipam (.+)$/gm)].map((m) => m[1])).toEqual(names);
    for (const name of names) {
      const help = await runCli([...name.split(' '), '--help']);
      expect({ name, code: help.code }).toEqual({ name, code: 0 });
      expect(documentedHelp(name)).toBe(help.stdout.trimEnd());
    }
  });
});
