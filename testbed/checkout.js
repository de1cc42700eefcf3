import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
/**
 * The repository this testbed runs from, the same from the sources (testbed/...), the build
 * (dist/testbed/...) and the suites' builds (dist-chaos/testbed/...): the nearest directory up
 * whose package.json names eni-ipam.
 */
export function findCheckout(from = dirname(fileURLToPath(import.meta.url))) {
  for (let dir = from; ; dir = dirname(dir)) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest) && JSON.parse(readFileSync(manifest, 'utf8')).name === 'eni-ipam') return dir;
    if (dirname(dir) === dir) throw new Error(`no eni-ipam checkout above ${from}`);
  }
}
export const CHECKOUT = findCheckout();
//# sourceMappingURL=checkout.js.map
