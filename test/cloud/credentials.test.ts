import { mkdtempSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  CredentialsError,
  envCredentials,
  fileCredentials,
  oidcRoleCredentials,
  ramRoleCredentials,
  rrsaFromEnv,
} from '../../src/cloud/index.js';
import type { EcsEmulator } from '../../src/sim/ecs/index.js';
import { clientFor } from '../helpers/cloud.js';
import { emulator } from '../helpers/ecs.js';

let emu: EcsEmulator;
beforeAll(async () => {
  emu = await emulator((f) => {
    f.ramRoles = [{ name: 'node-role', credentialTtlSeconds: 900 }];
  });
});
afterAll(() => emu.close());

describe('credentials', () => {
  it('reads an AccessKey from the environment and says what is missing', async () => {
    const p = envCredentials({
      ALIBABA_CLOUD_ACCESS_KEY_ID: 'demo',
      ALIBABA_CLOUD_ACCESS_KEY_SECRET: 'demo-secret',
      ALIBABA_CLOUD_SECURITY_TOKEN: 'tok',
    });
    expect(await p.getCredentials()).toEqual({
      accessKeyId: 'demo',
      accessKeySecret: 'demo-secret',
      securityToken: 'tok',
    });
    expect(p.source).toBe('environment');
    expect(() => envCredentials({ ALIBABA_CLOUD_ACCESS_KEY_ID: 'demo' })).toThrow(/ALIBABA_CLOUD_ACCESS_KEY_SECRET/);
  });

  it('reads mounted Secret files and picks up a rotation', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'creds-'));
    writeFileSync(join(dir, 'access-key-id'), 'demo\n');
    writeFileSync(join(dir, 'access-key-secret'), 'demo-secret\n');
    const p = fileCredentials(dir);
    const client = clientFor(emu, { credentials: p });
    expect((await client.api.describeVpcs()).length).toBe(1);
    writeFileSync(join(dir, 'access-key-secret'), 'rotated-wrong\n');
    utimesSync(join(dir, 'access-key-secret'), new Date(), new Date(Date.now() + 5000));
    expect(await client.api.describeVpcs().catch((e) => e.code)).toBe('SignatureDoesNotMatch');
    await client.close();
    await expect(fileCredentials(join(dir, 'nope')).getCredentials()).rejects.toThrow(CredentialsError);
  });

  it('uses an ECS RAM role through the metadata service, with the STS token checked by the API', async () => {
    const role = ramRoleCredentials({ role: 'node-role', metadataEndpoint: emu.metadataUrl });
    const creds = await role.getCredentials();
    expect(creds.accessKeyId).toMatch(/^STS\./);
    expect(creds.securityToken).toBeTruthy();
    const client = clientFor(emu, { credentials: role });
    expect((await client.api.describeInstances({ ids: ['i-demo-01'] }))[0]!.id).toBe('i-demo-01');
    await client.close();
    // The same key without its token is refused.
    const bare = clientFor(emu, {
      credentials: { source: 'test', getCredentials: async () => ({ ...creds, securityToken: undefined }) },
    });
    expect(await bare.api.describeVpcs().catch((e) => e.code)).toBe('InvalidSecurityToken.MismatchWithAccessKey');
    await bare.close();
  });

  it('uses RRSA: trades the projected service-account token for role credentials with STS AssumeRoleWithOIDC', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rrsa-'));
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, 'demo-service-account-token\n');
    const env = {
      ALIBABA_CLOUD_ROLE_ARN: 'acs:ram::1234567890123456:role/eni-ipam-demo-rrsa',
      ALIBABA_CLOUD_OIDC_PROVIDER_ARN: 'acs:ram::1234567890123456:oidc-provider/ack-rrsa-demo',
      ALIBABA_CLOUD_OIDC_TOKEN_FILE: tokenFile,
    };
    expect(rrsaFromEnv({ ...env, ALIBABA_CLOUD_OIDC_TOKEN_FILE: '' })).toBeUndefined();
    let now = Date.now();
    const rrsa = oidcRoleCredentials({ ...rrsaFromEnv(env)!, stsEndpoint: emu.url, now: () => now });
    expect(rrsa.source).toBe('RRSA role acs:ram::1234567890123456:role/eni-ipam-demo-rrsa');
    const creds = await rrsa.getCredentials();
    expect(creds.accessKeyId).toMatch(/^STS\./);
    const client = clientFor(emu, { credentials: rrsa });
    expect((await client.api.describeVpcs()).length).toBe(1);
    await client.close();

    // The kubelet rotates the token: a refresh reads the file again, and a token STS refuses is reported.
    writeFileSync(tokenFile, 'a-token-nobody-trusts');
    now += 56 * 60_000;
    await expect(rrsa.getCredentials()).resolves.toBe(creds); // still valid: kept while the refresh fails
    now += 5 * 60_000;
    await expect(rrsa.getCredentials()).rejects.toThrow(
      /AssumeRoleWithOIDC answered HTTP 400 AuthenticationFail.OIDCToken.Invalid/,
    );
    const wrongRole = oidcRoleCredentials({
      ...rrsaFromEnv(env)!,
      roleArn: 'acs:ram::1:role/nope',
      stsEndpoint: emu.url,
    });
    await expect(wrongRole.getCredentials()).rejects.toThrow(/EntityNotExist.Role/);
    const noToken = oidcRoleCredentials({
      ...rrsaFromEnv(env)!,
      tokenFile: join(dir, 'missing'),
      stsEndpoint: emu.url,
    });
    await expect(noToken.getCredentials()).rejects.toThrow(/cannot read the service-account token .*missing: ENOENT/);
  });

  it('refreshes role credentials before they expire, and keeps valid ones when a refresh fails', async () => {
    let now = Date.now();
    const role = ramRoleCredentials({
      role: 'node-role',
      metadataEndpoint: emu.metadataUrl,
      refreshBeforeMs: 5 * 60_000,
      now: () => now,
    });
    const first = await role.getCredentials();
    expect(await role.getCredentials()).toBe(first); // cached
    now += 11 * 60_000; // 4 minutes before expiry: inside the refresh margin
    const second = await role.getCredentials();
    expect(second.accessKeyId).not.toBe(first.accessKeyId);

    // The metadata service goes away: the cached credentials serve until they expire.
    const other = await emulator((f) => {
      f.ramRoles = [{ name: 'node-role', credentialTtlSeconds: 900 }];
    });
    now = Date.now();
    const flaky = ramRoleCredentials({ role: 'node-role', metadataEndpoint: other.metadataUrl, now: () => now });
    const cached = await flaky.getCredentials();
    await other.close();
    now += 12 * 60_000;
    expect(await flaky.getCredentials()).toBe(cached);
    now += 4 * 60_000;
    await expect(flaky.getCredentials()).rejects.toThrow(/unreachable/);

    const broken = ramRoleCredentials({ role: 'no-such-role', metadataEndpoint: emu.metadataUrl });
    await expect(broken.getCredentials()).rejects.toThrow(/RAM role no-such-role: metadata service answered HTTP 404/);
    const unreachable = ramRoleCredentials({ role: 'node-role', metadataEndpoint: 'http://127.0.0.1:9' });
    await expect(unreachable.getCredentials()).rejects.toThrow(/unreachable/);
  });
});
