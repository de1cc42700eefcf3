import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
// A generator, not a library module: the only place src/api reads from another room.
import { DEFAULT_API_LIMITS } from '../cloud/limits.js';
import { renderCrds } from './render.js';
import { renderValuesSchema } from './values-schema.js';

// `npm run gen:crds`: writes crds/*.yaml from the types in src/api, and the generated parts of
// the chart's values.schema.json (when its path is given).
const dir = process.argv[2] ?? 'crds';
mkdirSync(dir, { recursive: true });
for (const [file, text] of Object.entries(renderCrds())) {
  writeFileSync(join(dir, file), text);
  console.log(`wrote ${join(dir, file)}`);
}
const valuesSchema = process.argv[3];
if (valuesSchema) {
  writeFileSync(valuesSchema, renderValuesSchema(readFileSync(valuesSchema, 'utf8'), Object.keys(DEFAULT_API_LIMITS)));
  console.log(`wrote ${valuesSchema}`);
}
