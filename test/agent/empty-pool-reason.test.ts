import { describe, expect, it } from '@jest/globals';
import type { ENIPool } from '../../src/api/types.js';
import { emptyPoolReason } from '../../src/agent/allocator.js';

/* Why an ADD found no address, in the pool's words: what the runtime's Event and the allocate answer quote. */
const at = '2026-01-01T00:00:00Z';
function pool(conditions: Array<[string, string, string, string?]>, o: Partial<ENIPool> = {}): ENIPool {
  return {
    apiVersion: 'eniipam.io/v1alpha1',
    kind: 'ENIPool',
    metadata: { name: 'n1', ...o.metadata },
    spec: { nodeName: 'n1' },
    status: {
      conditions: conditions.map(([type, status, reason, message]) => ({
        type,
        status: status as 'True' | 'False',
        reason,
        message: message ?? '',
        lastTransitionTime: at,
      })),
      summary: { enis: 1, available: 5, used: 5, needed: 3, releasing: 0 },
    },
  };
}
const why = (p: ENIPool | undefined, recovering = false) => emptyPoolReason(p, { recovering, node: 'n1' });

describe('emptyPoolReason', () => {
  it('quotes the condition that says what the pool waits for', () => {
    const exhausted = pool([
      ['Ready', 'False', 'VSwitchExhausted', 'no free addresses in vsw-a'],
      ['Exhausted', 'True', 'VSwitchExhausted', 'no free addresses in vsw-a'],
    ]);
    expect(why(exhausted)).toBe('the pool is exhausted (VSwitchExhausted: no free addresses in vsw-a)');
    const quota = pool([
      ['Ready', 'False', 'Allocating', '3 more IPs are being allocated'],
      ['Degraded', 'True', 'Throttled', 'CreateNetworkInterface is throttled'],
    ]);
    expect(why(quota)).toBe('the pool is degraded (Throttled: CreateNetworkInterface is throttled)');
    const attaching = pool([['Ready', 'False', 'Allocating', '3 more IPs are being allocated']]);
    expect(why(attaching)).toBe('the pool is not ready (Allocating: 3 more IPs are being allocated)');
    expect(why(pool([['Ready', 'True', 'PoolFilled']]))).toBe(
      'all 5 pod IPs of the pool are in use or cooling down; 3 more are being allocated',
    );
  });

  it('says what the agent waits for when the pool cannot say', () => {
    expect(why(undefined)).toMatch(/^node n1 has no ENIPool yet \(is the eni-ipam operator running/);
    expect(why(pool([]), true)).toMatch(/^the agent is taking back what the pods of the node hold/);
    expect(why(pool([], { metadata: { name: 'n1', deletionTimestamp: at } }))).toBe(
      'the pool of node n1 is being deleted',
    );
  });
});
