import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { renderCrds } from './render.js';

// `npm run gen:crds`: writes crds/*.yaml from the types in src/api.
const dir = process.argv[2] ?? 'crds';
mkdirSync(dir, { recursive: true });
for (const [file, text] of Object.entries(renderCrds())) {
  writeFileSync(join(dir, file), text);
  console.log(`wrote ${join(dir, file)}`);
}
