import { describe, expect, it } from '@jest/globals';
import { leaderIdentity } from '../../src/cli/leader-identity.js';

describe("the operator's leader-election identity", () => {
  it("names the pod (POD_NAME), not the host: in the host network every pod of a node has the node's hostname", () => {
    const id = leaderIdentity({ POD_NAME: 'eni-ipam-operator-7d9f-x2x4k' }, () => 'node-01');
    expect(id).toMatch(/^eni-ipam-operator-7d9f-x2x4k-[0-9a-f]{8}$/);
  });

  it('falls back to the hostname outside a pod', () => {
    expect(leaderIdentity({}, () => 'laptop')).toMatch(/^laptop-[0-9a-f]{8}$/);
    expect(leaderIdentity({ POD_NAME: '' }, () => 'laptop')).toMatch(/^laptop-[0-9a-f]{8}$/);
  });

  it("differs for every process of the same pod, so a restarted container (PID 1 again) never takes its predecessor's lease as its own", () => {
    const ids = new Set(Array.from({ length: 50 }, () => leaderIdentity({ POD_NAME: 'op' }, () => 'node-01')));
    expect(ids.size).toBe(50);
  });
});
