import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { oidcRoleCredentials } from '../../../src/cloud/index.js';
import { startEcsEmulator, type EcsEmulator } from '../../../testbed/ecs/index.js';
import { startKubeEmulator, type KubeEmulator } from '../../../testbed/kube/index.js';
import { fastWorld } from '../../helpers/ecs.js';

// RRSA against an emulated cluster: the STS takes the cluster's projected service-account
// tokens (audience sts.aliyuncs.com) when given the cluster's verifier.
let ecs: EcsEmulator;
let kube: KubeEmulator;
beforeAll(async () => {
  kube = await startKubeEmulator({ tls: true, auth: true });
  ecs = await startEcsEmulator({
    fixture: fastWorld(),
    oidcVerifier: (token, audience) => kube.verifyServiceAccountToken(token, [audience]),
  });
  const ns = kube.store.types.get('serviceaccounts')!;
  kube.store.put(ns, {
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: {
      name: 'eni-ipam-operator',
      namespace: 'kube-system',
      uid: 'sa-uid',
      resourceVersion: kube.store.nextRv(),
    },
  });
});
afterAll(async () => {
  await ecs.close();
  await kube.close();
});

describe("STS AssumeRoleWithOIDC with a cluster's tokens", () => {
  const role = {
    roleArn: 'acs:ram::1234567890123456:role/eni-ipam-demo-rrsa',
    oidcProviderArn: 'acs:ram::1234567890123456:oidc-provider/ack-rrsa-demo',
  };
  const withToken = (token: string) => {
    const file = join(mkdtempSync(join(tmpdir(), 'sts-')), 'token');
    writeFileSync(file, token);
    return oidcRoleCredentials({ ...role, tokenFile: file, stsEndpoint: ecs.url });
  };

  it('trades a token with audience sts.aliyuncs.com for role credentials', async () => {
    const t = kube.issueServiceAccountToken({
      namespace: 'kube-system',
      serviceAccount: 'eni-ipam-operator',
      audiences: ['sts.aliyuncs.com'],
      expirationSeconds: 3600,
    });
    expect((await withToken(t.token).getCredentials()).accessKeyId).toMatch(/^STS\./);
  });

  it('refuses a token for another audience and a token of no cluster', async () => {
    const apiToken = kube.issueServiceAccountToken({
      namespace: 'kube-system',
      serviceAccount: 'eni-ipam-operator',
      expirationSeconds: 3600,
    });
    await expect(withToken(apiToken.token).getCredentials()).rejects.toThrow(/AuthenticationFail.OIDCToken.Invalid/);
    await expect(withToken('not-a-token').getCredentials()).rejects.toThrow(/AuthenticationFail.OIDCToken.Invalid/);
  });
});
