import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';

/**
 * The operator's leader-election identity: its pod's name (POD_NAME, from the downward API: in
 * the host network the hostname is the node's, shared by every pod there) and 8 random hex
 * characters. Random, not the PID: a container restarted in the same pod is PID 1 again, and
 * would take the Lease its previous process held for its own.
 */
export function leaderIdentity(env: NodeJS.ProcessEnv = process.env, host: () => string = hostname): string {
  return `${env.POD_NAME || host()}-${randomBytes(4).toString('hex')}`;
}
