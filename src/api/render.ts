import YAML from 'yaml';
import { CRDS } from './crds.js';

const HEADER = '# Generated from src/api by `npm run gen:crds`; do not edit.\n';

/** The checked-in CRD manifests, file name -> YAML. */
export function renderCrds(): Record<string, string> {
  return Object.fromEntries(
    Object.entries(CRDS).map(([plural, crd]) => [
      `eniipam.io_${plural}.yaml`,
      // No anchors and aliases for a schema used twice: not every tool that reads CRDs takes them.
      HEADER + YAML.stringify(crd, { lineWidth: 0, aliasDuplicateObjects: false }),
    ]),
  );
}
