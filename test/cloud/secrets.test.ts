import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import { ramRoleCredentials, staticCredentials } from '../../src/cloud/index.js';
import type { EcsEmulator } from '../../testbed/ecs/index.js';
import { capturingLogger, clientFor } from '../helpers/cloud.js';
import { emulator } from '../helpers/ecs.js';

const SECRET = 'TopSecret-Value-7f3a9c';
let emu: EcsEmulator;
beforeAll(async () => {
  emu = await emulator((f) => {
    f.credentials.push({ accessKeyId: 'svc-key', accessKeySecret: SECRET });
  });
});
afterAll(() => emu.close());

describe('no secret leaves the client', () => {
  it('keeps secrets, tokens, signatures and signed URLs out of logs, errors and metrics under faults', async () => {
    const { logger, lines } = capturingLogger();
    const registry = new Registry();
    const retry = { maxAttempts: 3, baseDelayMs: 5, maxDelayMs: 20, maxElapsedMs: 2000, attemptTimeoutMs: 200 };
    const role = ramRoleCredentials({ role: 'eni-ipam-demo-role', metadataEndpoint: emu.metadataUrl });
    const token = (await role.getCredentials()).securityToken!;
    const roleSecret = (await role.getCredentials()).accessKeySecret;
    const clients = [
      clientFor(emu, {
        credentials: staticCredentials({ accessKeyId: 'svc-key', accessKeySecret: SECRET }),
        logger,
        registry,
        retry,
      }),
      clientFor(emu, { credentials: role, logger, registry: new Registry(), retry }),
      clientFor(emu, {
        credentials: staticCredentials({ accessKeyId: 'svc-key', accessKeySecret: 'wrong-secret' }),
        logger,
        registry: new Registry(),
        retry,
      }),
    ];
    emu.setFaults({
      rules: [
        { kind: 'error', code: 'InternalError', rate: 0.3 },
        { kind: 'timeout', rate: 0.1 },
        { kind: 'non-json', rate: 0.1 },
        { kind: 'error', code: 'Throttling.User', rate: 0.1 },
      ],
      seed: 3,
    });
    const errors: string[] = [];
    for (const c of clients) {
      for (let i = 0; i < 15; i++) {
        await c.api.describeInstances({ ids: ['i-demo-01'] }).catch((e: Error) => {
          errors.push(e.message, String(e.stack), JSON.stringify(e));
          logger.error({ err: e }, 'call failed');
        });
      }
    }
    emu.clearFaults();
    logger.info({ config: { accessKeyId: 'svc-key', accessKeySecret: SECRET, securityToken: token } }, 'configuration');
    const metricsText = await registry.metrics();
    await Promise.all(clients.map((c) => c.close()));

    expect(errors.some((e) => e.includes('SignatureDoesNotMatch'))).toBe(true);
    expect(lines.some((l) => l.includes('retrying'))).toBe(true);
    const everything = [...lines, ...errors, metricsText].join('\n');
    for (const secret of [SECRET, token, roleSecret, 'wrong-secret']) expect(everything).not.toContain(secret);
    expect(everything).not.toMatch(/Signature=|SignatureNonce=|string to sign is:GET|https?:\/\/127\.0\.0\.1/);
  });
});
