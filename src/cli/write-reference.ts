import { writeFileSync } from 'node:fs';
import { commands } from './main.js';
import { cliReference } from './reference.js';

// npm run gen:docs: writes the command reference (docs/cli.md) from the built commands, the testbed's included.
const [out] = process.argv.slice(2);
if (!out) throw new Error('usage: write-reference.js OUT.md');
const { runnable, absent, why } = await commands();
if (absent.length) throw new Error(`${absent.map((c) => c.name).join(', ')}: ${why}`);
writeFileSync(out, cliReference(runnable));
