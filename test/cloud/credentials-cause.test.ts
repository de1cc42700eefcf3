/**
 * Found in review (it failed before the fix): credentials that cannot be had (a RAM
 * role the instance does not carry, a metadata service that fails, an empty Secret) are not said as
 * such: Degraded reads `CloudCallsFailing` with the code `Unknown` and "the operator retries with
 * a growing delay", and the failure is classified `unknown`, a permanent one (held back 5 s up to
 * ten minutes per node and action).
 *
 * rpc.ts calls `credentials.getCredentials()` inside its attempt; a CredentialsError that throws
 * there is turned by toCloudError into CloudError(action, 'Unknown', ...). failures.ts
 * cloudFailureCause has a branch for exactly this cause (`CloudCredentialsUnavailable`, code
 * `Client.Credentials`, "no credentials from <source>") but it is reached only by a non-CloudError,
 * which no cloud call ever throws: the branch is dead, and AUTH_CODES' `Client.Credentials` is a
 * code nothing produces.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import { CloudError, ramRoleCredentials } from '../../src/cloud/index.js';
import { cloudFailureCause } from '../../src/operator/failures.js';
import type { EcsEmulator } from '../../testbed/ecs/index.js';
import { clientFor } from '../helpers/cloud.js';
import { emulator } from '../helpers/ecs.js';

let emu: EcsEmulator | undefined;
let client: ReturnType<typeof clientFor> | undefined;
afterEach(async () => {
  await client?.close();
  await emu?.close();
  client = emu = undefined;
});

describe('credentials that cannot be fetched', () => {
  it('are said as a credentials problem naming the source, not as an unknown cloud failure', async () => {
    emu = await emulator();
    const credentials = ramRoleCredentials({ role: 'not-the-nodes-role', metadataEndpoint: emu.metadataUrl });
    client = clientFor(emu, { credentials });
    const err = (await client.api.describeNetworkInterfaces({}).catch((e: unknown) => e)) as CloudError;
    expect(err).toBeInstanceOf(CloudError);
    const cause = cloudFailureCause(err, credentials.source);
    // Before the fix: { reason: 'CloudCallsFailing', code: 'Unknown', message: 'DescribeNetworkInterfaces: Unknown: RAM role
    // not-the-nodes-role: metadata service answered HTTP 404; the operator retries with a growing delay' }.
    expect(['CloudCredentialsUnavailable', 'CloudAuthFailed']).toContain(cause.reason);
    expect(cause.message).toContain('not-the-nodes-role');
    // Not a permanent failure of the cloud: nothing was sent.
    expect(err.kind).not.toBe('unknown');
  });
});
