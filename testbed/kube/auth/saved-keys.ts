import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import type { ExistingCa } from './pki.js';

/**
 * The emulated cluster's keys kept beside its --state file (STATE.keys.json, mode 0600), as a
 * real control plane keeps /etc/kubernetes/pki: the CA and the service-account signing key, so
 * a restart keeps pods' ca.crt and issued tokens valid.
 */
export interface SavedKeys {
  ca?: ExistingCa;
  serviceAccountKey?: string;
}

export const keysPathFor = (statePath: string): string => `${statePath}.keys.json`;

export function loadKeys(path: string): SavedKeys {
  if (!existsSync(path)) return {};
  try {
    const k = JSON.parse(readFileSync(path, 'utf8')) as SavedKeys;
    if (k.ca && (typeof k.ca.cert !== 'string' || typeof k.ca.key !== 'string'))
      throw new Error('ca needs cert and key (PEM)');
    if (k.serviceAccountKey !== undefined && typeof k.serviceAccountKey !== 'string')
      throw new Error('serviceAccountKey must be a PEM string');
    return k;
  } catch (e) {
    throw new Error(
      `cannot read the emulator's keys from ${path}: ${(e as Error).message} (delete the file to make new ones)`,
    );
  }
}

export function saveKeys(path: string, keys: SavedKeys): void {
  writeFileSync(path, JSON.stringify(keys, null, 2), { mode: 0o600 });
}
