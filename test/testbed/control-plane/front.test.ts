import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { request } from 'node:https';
import type { ControlPlane } from '../../../testbed/control-plane/index.js';
import { kube, kubectlFor } from '../../helpers/kube.js';

let cp: ControlPlane;
beforeAll(async () => ({ emu: cp } = await kube({ controllers: false })));
afterAll(() => cp.close());

/** A request through the front with only the CA: no client certificate, and whatever headers. */
const anonymous = (path: string, headers: Record<string, string>) =>
  new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = request(`${cp.url}${path}`, { ca: cp.caCert, headers }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });

describe('the front before kube-apiserver', () => {
  it('passes a client certificate on as its identity, and nothing a caller claims in X-Remote headers', async () => {
    const who = await kubectlFor(cp)(['auth', 'whoami', '-o', 'jsonpath={.status.userInfo.username}']);
    expect(who.stdout).toBe('kubernetes-admin');
    const forged = await anonymous('/api/v1/namespaces/kube-system/secrets', {
      'X-Remote-User': 'kubernetes-admin',
      'X-Remote-Group': 'system:masters',
    });
    // Taken for the admin, it would be a 200 with the Secrets.
    expect(forged.status).toBe(401);
    expect(JSON.parse(forged.body).reason).toBe('Unauthorized');
  });

  it('passes a bearer token on for kube-apiserver to check', async () => {
    const refused = await anonymous('/api/v1/namespaces', { Authorization: 'Bearer not-a-token' });
    expect(refused.status).toBe(401);
  });
});
