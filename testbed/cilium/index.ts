import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { CHECKOUT } from '../checkout.js';

/**
 * Our CiliumNode CRD, for the Kubernetes emulator and the local cluster (read from the checkout,
 * the same from the sources and the build).
 */
export const CILIUM_NODE_CRD_PATH = join(CHECKOUT, 'testbed', 'cilium', 'ciliumnodes.crd.yaml');

export function ciliumNodeCrd(): Record<string, unknown> {
  return parse(readFileSync(CILIUM_NODE_CRD_PATH, 'utf8')) as Record<string, unknown>;
}
