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
import type { EcsEmulator } from '../../testbed/ecs/index.js';
import { startMetadataRelay, type MetadataRelay } from '../../testbed/ecs/metadata-relay.js';
import { clientFor } from '../helpers/cloud.js';
import { emulator, eventually, sleep } from '../helpers/ecs.js';

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

  it('serves cached role credentials at once and refreshes them once, in the background, ahead of expiry', async () => {
    const relay = await startMetadataRelay(emu.metadataUrl);
    let now = Date.now();
    const role = ramRoleCredentials({
      role: 'node-role',
      metadataEndpoint: relay.url,
      refreshBeforeMs: 5 * 60_000,
      now: () => now,
    });
    const first = await role.getCredentials();
    expect(await role.getCredentials()).toBe(first); // cached
    expect(credentialFetches(relay)).toBe(1);

    relay.latencyMs = 1000; // a slow metadata service
    now += 11 * 60_000; // 4 minutes before expiry: inside the refresh margin
    const t0 = Date.now();
    for (let i = 0; i < 20; i++) expect(await role.getCredentials()).toBe(first);
    const many = await Promise.all(Array.from({ length: 20 }, () => role.getCredentials()));
    expect(many.every((c) => c === first)).toBe(true);
    expect(Date.now() - t0).toBeLessThan(500); // nobody waited for the metadata service
    // One refresh for all those callers, in the background; then the new credentials serve.
    const second = await eventually(async () => {
      const c = await role.getCredentials();
      return c !== first ? c : undefined;
    }, 5000);
    expect(second.accessKeyId).not.toBe(first.accessKeyId);
    expect(credentialFetches(relay)).toBe(2);
    for (let i = 0; i < 10; i++) expect(await role.getCredentials()).toBe(second);
    expect(credentialFetches(relay)).toBe(2);
    await relay.close();
  });

  it('refreshes RRSA credentials in the background too, once for all callers', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rrsa-'));
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, 'demo-service-account-token\n');
    let now = Date.now();
    const rrsa = oidcRoleCredentials({
      roleArn: 'acs:ram::1234567890123456:role/eni-ipam-demo-rrsa',
      oidcProviderArn: 'acs:ram::1234567890123456:oidc-provider/ack-rrsa-demo',
      tokenFile,
      stsEndpoint: emu.url,
      now: () => now,
    });
    const stsCalls = () => emu.stats().calls.AssumeRoleWithOIDC?.OK ?? 0;
    const first = await rrsa.getCredentials();
    const calls = stsCalls();
    now += 56 * 60_000; // an hour's credentials, 4 minutes before expiry
    const all = await Promise.all(Array.from({ length: 10 }, () => rrsa.getCredentials()));
    expect(all.every((c) => c === first)).toBe(true);
    const second = await eventually(async () => {
      const c = await rrsa.getCredentials();
      return c !== first ? c : undefined;
    });
    expect(second.accessKeyId).toMatch(/^STS\./);
    expect(stsCalls()).toBe(calls + 1);
  });

  it('refreshes credentials shorter-lived than the margin at half their life, not on every call', async () => {
    const short = await emulator((f) => {
      f.ramRoles = [{ name: 'short-role', credentialTtlSeconds: 60 }];
    });
    const relay = await startMetadataRelay(short.metadataUrl);
    let now = Date.now();
    const role = ramRoleCredentials({ role: 'short-role', metadataEndpoint: relay.url, now: () => now });
    const first = await role.getCredentials();
    now += 25_000;
    for (let i = 0; i < 5; i++) expect(await role.getCredentials()).toBe(first);
    expect(credentialFetches(relay)).toBe(1);
    now += 10_000; // 25 s left of 60: past half its life
    expect(await role.getCredentials()).toBe(first);
    await eventually(async () => (await role.getCredentials()) !== first);
    expect(credentialFetches(relay)).toBe(2);
    await relay.close();
    await short.close();
  });

  it('remembers a failed refresh and retries it with a capped back-off, serving the valid credentials meanwhile', async () => {
    const relay = await startMetadataRelay(emu.metadataUrl);
    let now = Date.now();
    const role = ramRoleCredentials({
      role: 'node-role',
      metadataEndpoint: relay.url,
      refreshBeforeMs: 5 * 60_000,
      now: () => now,
      random: () => 0, // no jitter: the delays are exact
    });
    const first = await role.getCredentials();
    // The credentials were issued by now (real time): they expire 15 minutes after at the latest.
    const expiresBy = Date.now() + 15 * 60_000;
    relay.failWith = 500;
    now += 11 * 60_000; // inside the margin; 4 minutes (240 s) of validity left
    const start = now;
    const attempts: number[] = [];
    // A caller every (emulated) second until the credentials expire.
    for (let s = 0; s < 240; s++, now += 1000) {
      const before = credentialFetches(relay);
      expect(await role.getCredentials()).toBe(first);
      await sleep(8);
      if (credentialFetches(relay) > before) attempts.push((now - start) / 1000);
    }
    const gaps = attempts.slice(1).map((t, i) => t - attempts[i]!);
    // 1 s doubling to the 60 s cap; a failure noticed a tick late shifts one gap by a second.
    const expected = [1, 2, 4, 8, 16, 32, 60, 60];
    expect(gaps.length).toBe(expected.length);
    gaps.forEach((g, i) => {
      expect(g).toBeGreaterThanOrEqual(expected[i]!);
      expect(g).toBeLessThanOrEqual(expected[i]! + 2);
    });
    // Expired, and the back-off still running: the last error at once, without asking again. (The
    // emulated clock started before the fetch: on a loaded machine the credentials, issued some
    // real milliseconds later, outlive its 240 s by as much.)
    now = Math.max(now, expiresBy + 1);
    const asked = credentialFetches(relay);
    await expect(role.getCredentials()).rejects.toThrow(
      /^RAM role node-role: metadata service answered HTTP 500 \(no valid credentials; next attempt in \d+\.\d s\)$/,
    );
    expect(credentialFetches(relay)).toBe(asked);
    // Once the back-off has run, a caller waits for a fetch; the service is back.
    relay.failWith = 0;
    now += 61_000;
    expect((await role.getCredentials()).accessKeyId).not.toBe(first.accessKeyId);
    await relay.close();
  });

  it('keeps valid role credentials while the metadata service is gone, and says so once they expire', async () => {
    const other = await emulator((f) => {
      f.ramRoles = [{ name: 'node-role', credentialTtlSeconds: 900 }];
    });
    let now = Date.now();
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

/** Credential requests the relay served (the hardened-mode token requests aside). */
const credentialFetches = (relay: MetadataRelay) =>
  relay.requests.filter((r) => r.path.startsWith('/latest/meta-data/ram/security-credentials/')).length;
