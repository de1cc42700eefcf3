/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { createPublicKey, createVerify } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'node:https';
import { connect } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ApiException, CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import YAML from 'yaml';
import { issueServiceAccountToken, startKubeEmulator, type KubeEmulator } from '../../../testbed/kube/index.js';
import { CHART, CREDENTIAL_FORMS, REQUIRED, run, setArgs, tool } from '../../helpers/helm.js';
import { WIDGET_CRD, kubectlFor, type Kubectl } from '../../helpers/kube.js';

let emu: KubeEmulator;
let k: Kubectl;
let dir: string;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kube-secure-'));
  emu = await startKubeEmulator({
    tls: { sans: ['10.99.0.1', 'api.cluster.example'] },
    auth: true,
    kubeconfigPath: join(dir, 'kubeconfig'),
  });
  k = kubectlFor(emu);
  await k(['create', 'namespace', 'team']);
  await k(['create', 'serviceaccount', 'robot', '-n', 'team']);
});
afterAll(() => emu.close());

const port = () => new URL(emu.url).port;

/** kubectl as someone else: the server and CA of the emulator, and only the given credentials. */
function kubectlWith(
  user: Record<string, string>,
  cluster: Record<string, unknown> = { 'certificate-authority-data': Buffer.from(emu.caCert!).toString('base64') },
): Kubectl {
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'c', cluster: { server: emu.url, ...cluster } }],
    users: [{ name: 'u', user }],
    contexts: [{ name: 'x', context: { cluster: 'c', user: 'u', namespace: 'team' } }],
    'current-context': 'x',
  };
  return kubectlFor({ ...emu, kubeconfig: YAML.stringify(config) });
}

/** A request with no credentials at all. */
const anonymous = (path: string) => anonymousWith(undefined, path);

/** A request with only this bearer token (or none), over HTTPS with the cluster CA. */
function anonymousWith(token: string | undefined, path: string): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${emu.url}${path}`,
      { ca: emu.caCert, headers: token ? { authorization: `Bearer ${token}` } : {} },
      (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** client-node as a pod sees it: loadFromCluster with the token, ca.crt and namespace files. */
function inCluster(token: string): KubeConfig {
  const prefix = mkdtempSync(join(tmpdir(), 'pod-'));
  const sa = join(prefix, 'var/run/secrets/kubernetes.io/serviceaccount');
  mkdirSync(sa, { recursive: true });
  writeFileSync(join(sa, 'token'), token);
  writeFileSync(join(sa, 'ca.crt'), readFileSync(emu.caPath!));
  writeFileSync(join(sa, 'namespace'), 'team');
  const saved = { host: process.env.KUBERNETES_SERVICE_HOST, port: process.env.KUBERNETES_SERVICE_PORT };
  process.env.KUBERNETES_SERVICE_HOST = '127.0.0.1';
  process.env.KUBERNETES_SERVICE_PORT = port();
  try {
    const kc = new KubeConfig();
    kc.loadFromCluster(prefix);
    return kc;
  } finally {
    process.env.KUBERNETES_SERVICE_HOST = saved.host;
    process.env.KUBERNETES_SERVICE_PORT = saved.port;
    if (saved.host === undefined) delete process.env.KUBERNETES_SERVICE_HOST;
    if (saved.port === undefined) delete process.env.KUBERNETES_SERVICE_PORT;
  }
}

const apiError = async (p: Promise<unknown>): Promise<{ code: number; body: any }> => {
  try {
    await p;
  } catch (e) {
    if (e instanceof ApiException)
      return { code: e.code, body: typeof e.body === 'string' ? JSON.parse(e.body) : e.body };
    throw e;
  }
  throw new Error('the request succeeded');
};

describe('TLS', () => {
  it('serves HTTPS with a CA written beside the kubeconfig, which kubectl verifies', async () => {
    expect(emu.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    expect(existsSync(join(dir, 'ca.crt'))).toBe(true);
    expect(readFileSync(join(dir, 'ca.crt'), 'utf8')).toBe(emu.caCert);
    const kubeconfig = YAML.parse(readFileSync(join(dir, 'kubeconfig'), 'utf8'));
    expect(Buffer.from(kubeconfig.clusters[0].cluster['certificate-authority-data'], 'base64').toString()).toBe(
      emu.caCert,
    );
    expect((await k(['get', 'namespace', 'team', '-o', 'name'])).stdout).toBe('namespace/team\n');
  });

  it('fails verification without the CA', async () => {
    const token = (await k(['create', 'token', 'robot', '-n', 'team'])).stdout.trim();
    const r = await kubectlWith({ token }, {})(['get', 'pods']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('x509: certificate signed by unknown authority');
  });

  it('listening on any address, gives clients a loopback URL the certificate covers', async () => {
    const any = await startKubeEmulator({ host: '0.0.0.0', tls: true });
    try {
      expect(YAML.parse(any.kubeconfig).clusters[0].cluster.server).toBe(`https://127.0.0.1:${new URL(any.url).port}`);
      expect((await kubectlFor(any)(['get', 'namespace', 'default', '-o', 'name'])).stdout).toBe('namespace/default\n');
    } finally {
      await any.close();
    }
  });

  it('covers 127.0.0.1, localhost, the in-cluster names and the extra addresses', async () => {
    const san = await new Promise<string>((resolve, reject) => {
      const s = connect({ host: '127.0.0.1', port: Number(port()), ca: emu.caCert, servername: 'localhost' }, () => {
        resolve(s.getPeerCertificate().subjectaltname ?? '');
        s.end();
      });
      s.on('error', reject);
    });
    for (const name of [
      'IP Address:127.0.0.1',
      'DNS:localhost',
      'DNS:kubernetes.default.svc',
      'IP Address:10.99.0.1',
      'DNS:api.cluster.example',
    ])
      expect(san).toContain(name);
  });
});

describe('authentication', () => {
  it("the admin kubeconfig's client certificate is cluster-admin through system:masters", async () => {
    const who = await k(['auth', 'whoami', '-o', 'json']);
    expect(JSON.parse(who.stdout).status.userInfo).toMatchObject({
      username: 'kubernetes-admin',
      groups: ['system:masters', 'system:authenticated'],
    });
    expect((await k(['auth', 'can-i', '*', '*'])).stdout).toBe('yes\n');
  });

  it('answers an unknown bearer token with 401 and lets anonymous reach only public info', async () => {
    const bad = await kubectlWith({ token: 'not-a-token' })(['get', 'pods']);
    expect(bad.stderr).toContain('error: You must be logged in to the server');
    expect(await anonymousWith('not-a-token', '/version')).toMatchObject({
      status: 401,
      body: { reason: 'Unauthorized', message: 'Unauthorized' },
    });
    // Without the CA, Node refuses the server's certificate too.
    await expect(fetch(`${emu.url}/version`)).rejects.toThrow('fetch failed');
    expect(await anonymous('/version')).toMatchObject({ status: 200, body: { gitVersion: 'v1.32.4' } });
    expect(await anonymous('/api/v1/namespaces/team/pods')).toEqual({
      status: 403,
      body: expect.objectContaining({
        reason: 'Forbidden',
        message:
          'pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" in the namespace "team"',
      }),
    });
    expect((await anonymous('/apis')).status).toBe(403);
  });

  it('issues service-account tokens with the standard claims (kubectl create token)', async () => {
    const token = (
      await k(['create', 'token', 'robot', '-n', 'team', '--audience', 'sts.example', '--duration', '20m'])
    ).stdout.trim();
    const claims = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString());
    const uid = (await k(['get', 'serviceaccount', 'robot', '-n', 'team', '-o', 'jsonpath={.metadata.uid}'])).stdout;
    expect(claims).toMatchObject({
      iss: 'https://kubernetes.default.svc.cluster.local',
      sub: 'system:serviceaccount:team:robot',
      aud: ['sts.example'],
      'kubernetes.io': { namespace: 'team', serviceaccount: { name: 'robot', uid } },
    });
    expect(claims.exp - claims.iat).toBe(1200);
    expect(JSON.parse(Buffer.from(token.split('.')[0]!, 'base64url').toString()).alg).toBe('RS256');
    // A token for another audience does not authenticate to the API server.
    expect((await kubectlWith({ token })(['auth', 'whoami'])).stderr).toContain('Unauthorized');
  });

  it('publishes the issuer keys (OIDC discovery) so a relying party can verify tokens offline', async () => {
    const token = (await k(['create', 'token', 'robot', '-n', 'team', '--audience', 'sts.aliyuncs.com'])).stdout.trim();
    const asRobot = kubectlWith({ token: (await k(['create', 'token', 'robot', '-n', 'team'])).stdout.trim() });
    const config = JSON.parse((await asRobot(['get', '--raw', '/.well-known/openid-configuration'])).stdout);
    expect(config).toMatchObject({
      issuer: 'https://kubernetes.default.svc.cluster.local',
      jwks_uri: `https://127.0.0.1:${port()}/openid/v1/jwks`,
      id_token_signing_alg_values_supported: ['RS256'],
    });
    const jwks = JSON.parse((await asRobot(['get', '--raw', '/openid/v1/jwks'])).stdout);
    const [header, payload, signature] = token.split('.') as [string, string, string];
    const jwk = jwks.keys.find((key: any) => key.kid === JSON.parse(Buffer.from(header, 'base64url').toString()).kid);
    const ok = createVerify('RSA-SHA256')
      .update(`${header}.${payload}`)
      .verify(createPublicKey({ key: jwk, format: 'jwk' }), Buffer.from(signature, 'base64url'));
    expect(ok).toBe(true);
    expect((await anonymous('/openid/v1/jwks')).status).toBe(403);
  });

  it('client-node in a pod (loadFromCluster) authenticates with a token and verifies ca.crt', async () => {
    const token = (await k(['create', 'token', 'robot', '-n', 'team'])).stdout.trim();
    const kc = inCluster(token);
    expect(kc.getCurrentCluster()!.server).toBe(`https://127.0.0.1:${port()}`);
    const core = kc.makeApiClient(CoreV1Api);
    const denied = await apiError(core.listNamespacedPod({ namespace: 'team' }));
    expect(denied.code).toBe(403);
    expect(denied.body.message).toBe(
      'pods is forbidden: User "system:serviceaccount:team:robot" cannot list resource "pods" in API group "" in the namespace "team"',
    );
    expect(denied.body).toMatchObject({ reason: 'Forbidden', details: { kind: 'pods' } });
    await k(['create', 'role', 'pod-reader', '-n', 'team', '--verb=get,list,watch', '--resource=pods']);
    await k([
      'create',
      'rolebinding',
      'robot-reads-pods',
      '-n',
      'team',
      '--role=pod-reader',
      '--serviceaccount=team:robot',
    ]);
    expect((await core.listNamespacedPod({ namespace: 'team' })).items).toEqual([]);
    // The binding is namespaced: kube-system stays closed.
    expect((await apiError(core.listNamespacedPod({ namespace: 'kube-system' }))).code).toBe(403);
  });

  it('binds a token to a pod: it stops working when the pod is deleted', async () => {
    const pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'agent-1', namespace: 'team' },
      spec: { serviceAccountName: 'robot', containers: [{ name: 'a', image: 'x' }] },
    };
    await k(['create', '-f', '-'], JSON.stringify(pod));
    const uid = (await k(['get', 'pod', 'agent-1', '-n', 'team', '-o', 'jsonpath={.metadata.uid}'])).stdout;
    const { token } = issueServiceAccountToken(emu, {
      namespace: 'team',
      serviceAccount: 'robot',
      expirationSeconds: 3607,
      boundObject: { kind: 'Pod', name: 'agent-1', uid },
    });
    expect(JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString())['kubernetes.io'].pod).toEqual({
      name: 'agent-1',
      uid,
    });
    const who = await kubectlWith({ token })(['auth', 'whoami', '-o', 'json']);
    expect(JSON.parse(who.stdout).status.userInfo).toMatchObject({
      username: 'system:serviceaccount:team:robot',
      groups: ['system:serviceaccounts', 'system:serviceaccounts:team', 'system:authenticated'],
      extra: { 'authentication.kubernetes.io/pod-name': ['agent-1'], 'authentication.kubernetes.io/pod-uid': [uid] },
    });
    const viaApi = await k([
      'create',
      'token',
      'robot',
      '-n',
      'team',
      '--bound-object-kind',
      'Pod',
      '--bound-object-name',
      'agent-1',
    ]);
    expect(JSON.parse(Buffer.from(viaApi.stdout.split('.')[1]!, 'base64url').toString())['kubernetes.io'].pod.uid).toBe(
      uid,
    );
    await k(['delete', 'pod', 'agent-1', '-n', 'team', '--wait=false']);
    expect((await kubectlWith({ token })(['auth', 'whoami'])).stderr).toContain('Unauthorized');
    expect(() => issueServiceAccountToken(emu, { namespace: 'team', serviceAccount: 'nobody' })).toThrow(
      'serviceaccounts "nobody" not found',
    );
  });
});

describe('RBAC', () => {
  beforeAll(async () => {
    await k(['apply', '-f', '-'], YAML.stringify(WIDGET_CRD));
    await k(['create', 'serviceaccount', 'operator', '-n', 'team']);
    await k([
      'create',
      'clusterrole',
      'widget-status',
      '--verb=get,list,patch',
      '--resource=widgets.example.io/status',
    ]);
    await k(['create', 'clusterrole', 'widget-reader', '--verb=get,list,watch', '--resource=widgets.example.io']);
    await k([
      'create',
      'rolebinding',
      'operator-status',
      '-n',
      'team',
      '--clusterrole=widget-status',
      '--serviceaccount=team:operator',
    ]);
    await k([
      'create',
      'rolebinding',
      'operator-reads',
      '-n',
      'team',
      '--clusterrole=widget-reader',
      '--serviceaccount=team:operator',
    ]);
    await k([
      'create',
      'role',
      'one-secret',
      '-n',
      'team',
      '--verb=get',
      '--resource=secrets',
      '--resource-name=creds',
    ]);
    await k([
      'create',
      'rolebinding',
      'operator-secret',
      '-n',
      'team',
      '--role=one-secret',
      '--serviceaccount=team:operator',
    ]);
    await k(['create', 'secret', 'generic', 'creds', '-n', 'team', '--from-literal=a=b']);
    await k(['create', 'secret', 'generic', 'other', '-n', 'team', '--from-literal=a=b']);
    await k(
      ['apply', '-f', '-'],
      YAML.stringify({
        apiVersion: 'example.io/v1',
        kind: 'Widget',
        metadata: { name: 'w', namespace: 'team' },
        spec: { size: 1 },
      }),
    );
  });
  const as = (args: string[]) => k([...args, '--as=system:serviceaccount:team:operator']);

  it('kubectl auth can-i answers from Roles, ClusterRoles, bindings, subresources and resourceNames', async () => {
    const can = async (...args: string[]) => (await as(['auth', 'can-i', ...args, '-n', 'team'])).stdout.trim();
    expect(await can('get', 'widgets.example.io')).toBe('yes');
    expect(await can('patch', 'widgets.example.io')).toBe('no');
    expect(await can('patch', 'widgets.example.io', '--subresource=status')).toBe('yes');
    expect(await can('get', 'secrets/creds')).toBe('yes');
    expect(await can('get', 'secrets/other')).toBe('no');
    expect(await can('list', 'secrets')).toBe('no');
    expect((await as(['auth', 'can-i', 'get', 'widgets.example.io', '-n', 'default'])).stdout.trim()).toBe('no');
    expect((await as(['auth', 'can-i', 'get', '/healthz'])).stdout.trim()).toBe('yes');
    expect((await as(['auth', 'can-i', 'get', '/metrics'])).stdout.trim()).toBe('no');
    expect((await as(['auth', 'can-i', '--list', '-n', 'team'])).stdout).toMatch(
      /secrets\s+\[\]\s+\[creds\]\s+\[get\]/,
    );
    expect((await as(['auth', 'can-i', 'create', 'selfsubjectaccessreviews'])).stdout.trim()).toBe('yes');
    const resources = (await k(['api-resources', '--api-group=authorization.k8s.io', '-o', 'name'])).stdout;
    expect(resources).toBe(
      'selfsubjectaccessreviews.authorization.k8s.io\nselfsubjectrulesreviews.authorization.k8s.io\n',
    );
  });

  it("denies with the API server's 403 messages", async () => {
    const patch = await as(['patch', 'widget', 'w', '-n', 'team', '--type=merge', '-p', '{"spec":{"size":2}}']);
    expect(patch.stderr).toContain(
      'Error from server (Forbidden): widgets.example.io "w" is forbidden: User "system:serviceaccount:team:operator" cannot patch resource "widgets" in API group "example.io" in the namespace "team"',
    );
    const status = await as([
      'patch',
      'widget',
      'w',
      '-n',
      'team',
      '--subresource=status',
      '--type=merge',
      '-p',
      '{"status":{"phase":"Ready"}}',
    ]);
    expect(status).toMatchObject({ code: 0 });
    const secret = await as(['get', 'secret', 'other', '-n', 'team']);
    expect(secret.stderr).toContain(
      'secrets "other" is forbidden: User "system:serviceaccount:team:operator" cannot get resource "secrets" in API group "" in the namespace "team"',
    );
    expect((await as(['get', 'secret', 'creds', '-n', 'team', '-o', 'name'])).stdout).toBe('secret/creds\n');
    // A list narrowed to one name by fieldSelector is authorized against resourceNames, as kubectl get NAME -w needs.
    await k([
      'create',
      'role',
      'list-one-secret',
      '-n',
      'team',
      '--verb=list,watch',
      '--resource=secrets',
      '--resource-name=creds',
    ]);
    await k([
      'create',
      'rolebinding',
      'operator-lists-secret',
      '-n',
      'team',
      '--role=list-one-secret',
      '--serviceaccount=team:operator',
    ]);
    expect(
      (await as(['get', 'secrets', '-n', 'team', '--field-selector=metadata.name=creds', '-o', 'name'])).stdout,
    ).toBe('secret/creds\n');
    expect((await as(['get', 'secrets', '-n', 'team', '-o', 'name'])).stderr).toContain(
      'secrets is forbidden: User "system:serviceaccount:team:operator" cannot list resource "secrets"',
    );
    const nodes = await as(['get', 'nodes']);
    expect(nodes.stderr).toContain(
      'nodes is forbidden: User "system:serviceaccount:team:operator" cannot list resource "nodes" in API group "" at the cluster scope',
    );
    const raw = await as(['get', '--raw', '/metrics']);
    expect(raw.stderr).toContain(
      'Error from server (Forbidden): forbidden: User "system:serviceaccount:team:operator" cannot get path "/metrics"',
    );
  });

  it('aggregates ClusterRoles by label, as the built-in admin/edit/view roles do', async () => {
    const agg = {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'aggregate-ops' },
      aggregationRule: { clusterRoleSelectors: [{ matchLabels: { 'example.io/aggregate-to-ops': 'true' } }] },
      rules: [],
    };
    const part = {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'ops-nodes', labels: { 'example.io/aggregate-to-ops': 'true' } },
      rules: [{ apiGroups: [''], resources: ['nodes'], verbs: ['list'] }],
    };
    await k(['apply', '-f', '-'], YAML.stringify({ apiVersion: 'v1', kind: 'List', items: [agg, part] }));
    await k([
      'create',
      'clusterrolebinding',
      'operator-ops',
      '--clusterrole=aggregate-ops',
      '--serviceaccount=team:operator',
    ]);
    expect((await as(['auth', 'can-i', 'list', 'nodes'])).stdout.trim()).toBe('yes');
  });

  it('impersonation itself needs RBAC', async () => {
    const token = (await k(['create', 'token', 'robot', '-n', 'team'])).stdout.trim();
    const r = await kubectlWith({ token })(['get', '--raw', '/api/v1/namespaces/team/pods', '--as=bob']);
    expect(r.stderr).toContain(
      'users "bob" is forbidden: User "system:serviceaccount:team:robot" cannot impersonate resource "users" in API group "" at the cluster scope',
    );
    const robot = inCluster(token);
    const api = robot.makeApiClient(CustomObjectsApi);
    const denied = await apiError(
      api.listNamespacedCustomObject({ group: 'example.io', version: 'v1', namespace: 'team', plural: 'widgets' }),
    );
    expect(denied.body.message).toBe(
      'widgets.example.io is forbidden: User "system:serviceaccount:team:robot" cannot list resource "widgets" in API group "example.io" in the namespace "team"',
    );
  });
});

describe('helm over TLS with RBAC on', () => {
  it("installs charts/eni-ipam with the admin kubeconfig, and RBAC then holds the chart's service accounts to its rules", async () => {
    const kubeconfig = join(k.dir, 'kubeconfig');
    const values = setArgs([...REQUIRED, ...CREDENTIAL_FORMS.secret!]);
    const installed = await run(tool('helm'), [
      '--kubeconfig',
      kubeconfig,
      'install',
      'eni-ipam',
      CHART,
      '-n',
      'kube-system',
      ...values,
    ]);
    expect(installed.stderr).toBe('');
    const operator = (args: string[]) =>
      k(['auth', 'can-i', ...args, '--as=system:serviceaccount:kube-system:eni-ipam-operator']);
    expect((await operator(['list', 'enipools.eniipam.io'])).stdout).toBe('yes\n');
    expect((await operator(['patch', 'enipools.eniipam.io', '--subresource=status'])).stdout).toBe('yes\n');
    expect((await operator(['create', 'leases.coordination.k8s.io', '-n', 'kube-system'])).stdout).toBe('yes\n');
    expect((await operator(['delete', 'secrets', '-n', 'kube-system'])).stdout).toBe('no\n');
    const uninstalled = await run(tool('helm'), [
      '--kubeconfig',
      kubeconfig,
      'uninstall',
      'eni-ipam',
      '-n',
      'kube-system',
    ]);
    expect(uninstalled.stdout).toBe('release "eni-ipam" uninstalled\n');
  });
});

describe('restarts with a state file', () => {
  it('keep the CA and the signing key, so ca.crt and issued tokens stay valid', async () => {
    const d = mkdtempSync(join(tmpdir(), 'kube-restart-'));
    const opts = { tls: true, auth: true, statePath: join(d, 'state.json') };
    const first = await startKubeEmulator(opts);
    await kubectlFor(first)(['create', 'serviceaccount', 'keeper']);
    const { token } = issueServiceAccountToken(first, { namespace: 'default', serviceAccount: 'keeper' });
    const ca = first.caCert;
    await first.close();
    expect(statSync(join(d, 'state.json.keys.json')).mode & 0o777).toBe(0o600);
    const second = await startKubeEmulator(opts);
    try {
      expect(second.caCert).toBe(ca);
      const asKeeper = kubectlFor({
        ...second,
        kubeconfig: YAML.stringify({
          ...YAML.parse(second.kubeconfig),
          users: [{ name: 'emulator-admin', user: { token } }],
        }),
      });
      expect((await asKeeper(['auth', 'whoami', '-o', 'jsonpath={.status.userInfo.username}'])).stdout).toBe(
        'system:serviceaccount:default:keeper',
      );
    } finally {
      await second.close();
    }
  });
});
