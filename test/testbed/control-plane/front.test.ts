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

describe('the front’s upgrade path', () => {
  it('sends nothing more of the caller’s up a connection kube-apiserver did not upgrade', async () => {
    const { connect } = await import('node:tls');
    const url = new URL(cp.url);
    // No client certificate: an upgrade kube-apiserver refuses, then a second request on the same
    // connection, which would travel as the front's own certificate if the bytes were passed on.
    const socket = connect({ host: url.hostname, port: Number(url.port), ca: cp.caCert, servername: 'localhost' });
    await new Promise((r) => socket.once('secureConnect', r));
    let answer = '';
    socket.on('data', (c) => (answer += c.toString('latin1')));
    const closed = new Promise((r) => socket.once('close', r));
    socket.write(
      'GET /api/v1/namespaces/kube-system/secrets HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n' +
        'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n' +
        'GET /api/v1/namespaces/kube-system/secrets HTTP/1.1\r\nHost: x\r\nX-Remote-User: kubernetes-admin\r\n' +
        'X-Remote-Group: system:masters\r\n\r\n',
    );
    await closed;
    // One answer, a refusal; no list of Secrets.
    expect(answer).not.toContain('"kind":"SecretList"');
    expect(answer).toMatch(/^HTTP\/1\.1 (401|403) /);
  });

  it('serves its /_emulator/ routes to the cluster’s admins only', async () => {
    expect((await anonymous('/_emulator/faults', {})).status).toBe(403);
    expect((await cp.rest('GET', '/_emulator/faults')).status).toBe(200);
  });
});
