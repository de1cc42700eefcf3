import { describe, expect, it } from '@jest/globals';
import { DEFAULT_API_LIMITS } from '../../src/cloud/limits.js';
import { ACCOUNT_API_QUOTAS } from '../../testbed/ecs/index.js';

// The emulated account's quotas are its own (testbed/ecs/default-world.ts), not read from the
// client: a client default above what the account allows would be throttled in every run.
describe('the client’s per-action defaults', () => {
  it('cover every action the emulated account limits, and stay within its quota', () => {
    expect(Object.keys(DEFAULT_API_LIMITS).sort()).toEqual(Object.keys(ACCOUNT_API_QUOTAS).sort());
    const above = Object.entries(DEFAULT_API_LIMITS).filter(
      ([action, perMinute]) => perMinute > ACCOUNT_API_QUOTAS[action]!,
    );
    expect(above).toEqual([]);
  });
});
