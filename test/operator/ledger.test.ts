// The ledger of ENI work in flight: the counts the plan reads are derived from its records, so
// they never go negative, and every record ends, whatever the operations do and in whatever order
// (and the real lifecycle ends every record it begins, whatever the cloud answers).
import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { CloudError, type NetworkInterface } from '../../src/cloud/index.js';
import { EniLedger, type EniOperation } from '../../src/operator/eni/ledger.js';
import { NODE, eni, fixture, pool, scriptedLifecycle, settle } from './fakes.js';

const NODES = ['node-a', 'node-b'];

/** One step of the background work or of the reconciler, against the ledger. */
type Step =
  | { kind: 'create' | 'attach' | 'remove'; node: number; eni: number; ips: number }
  | { kind: 'created' | 'removed' | 'end'; op: number }
  | { kind: 'listed'; node: number; enis: number[] }
  | { kind: 'forget'; node: number };

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({
    kind: fc.constantFrom('create' as const, 'attach' as const, 'remove' as const),
    node: fc.nat(1),
    eni: fc.nat(5),
    ips: fc.nat(20),
  }),
  fc.record({ kind: fc.constantFrom('created' as const, 'removed' as const, 'end' as const), op: fc.nat(30) }),
  fc.record({ kind: fc.constant('listed' as const), node: fc.nat(1), enis: fc.array(fc.nat(5), { maxLength: 4 }) }),
  fc.record({ kind: fc.constant('forget' as const), node: fc.nat(1) }),
);

/** Runs steps as the lifecycle would: a phase change only where the phase allows it. */
function run(ledger: EniLedger, steps: Step[]): EniOperation[] {
  const begun: EniOperation[] = [];
  for (const s of steps) {
    switch (s.kind) {
      case 'create':
        begun.push(ledger.beginCreate(NODES[s.node]!, `token-${begun.length}`, s.ips));
        break;
      case 'attach':
        begun.push(ledger.beginAttach(NODES[s.node]!, `eni-${s.eni}`, s.ips));
        break;
      case 'remove':
        begun.push(ledger.beginRemove(NODES[s.node]!, `eni-${s.eni}`));
        break;
      case 'listed':
        ledger.listed(
          NODES[s.node]!,
          s.enis.map((n) => `eni-${n}`),
        );
        break;
      case 'forget':
        ledger.forget(NODES[s.node]!);
        break;
      default: {
        const op = begun[s.op % Math.max(1, begun.length)];
        if (!op) break;
        if (s.kind === 'created' && op.phase === 'creating') ledger.created(op, `eni-new-${s.op}`);
        else if (s.kind === 'removed' && op.phase === 'removing') ledger.removed(op);
        else if (s.kind === 'end' && op.phase !== 'removing' && op.phase !== 'removed') ledger.end(op);
      }
    }
    for (const node of NODES) {
      const work = ledger.inFlight(node);
      const open = ledger.records(node);
      const coming = open.filter((op) => op.phase === 'creating' || op.phase === 'attaching');
      expect(work.enis).toBeGreaterThanOrEqual(0);
      expect(work.ips).toBeGreaterThanOrEqual(0);
      expect(work.enis).toBe(coming.length);
      expect(work.ips).toBe(coming.reduce((sum, op) => sum + op.ips, 0));
      for (const id of work.removing) expect(work.removedByUs.has(id)).toBe(true);
      for (const id of work.attaching)
        expect(open.some((op) => op.eniId === id && op.phase === 'attaching')).toBe(true);
    }
  }
  return begun;
}

describe('EniLedger', () => {
  it('derives counts that never go negative and match its records, whatever the order of steps', () => {
    fc.assert(
      fc.property(fc.array(step, { maxLength: 40 }), (steps) => {
        run(new EniLedger(), steps);
      }),
      { numRuns: 2000 },
    );
  });

  it('ends every record: each operation run to its end, and its removal listed, leaves nothing', () => {
    fc.assert(
      fc.property(fc.array(step, { maxLength: 40 }), (steps) => {
        const ledger = new EniLedger();
        const begun = run(ledger, steps);
        // Every operation finishes as the lifecycle finishes it: a create or attach ends; a removal
        // ends its removing phase, and the next publish no longer lists its ENI.
        for (const op of begun) {
          if (op.phase === 'removing') ledger.removed(op);
          else if (op.phase !== 'removed') ledger.end(op);
          ledger.end(op); // twice: nothing changes
        }
        for (const node of NODES) ledger.listed(node, []);
        expect(ledger.records()).toEqual([]);
        for (const node of NODES) expect(ledger.inFlight(node)).toMatchObject({ enis: 0, ips: 0 });
      }),
      { numRuns: 2000 },
    );
  });

  it('refuses a phase change the operation is not in, and a negative count of addresses', () => {
    const ledger = new EniLedger();
    const attach = ledger.beginAttach(NODE, 'eni-1', 4);
    expect(() => ledger.created(attach, 'eni-2')).toThrow('is attaching, not creating');
    expect(() => ledger.removed(attach)).toThrow('is attaching, not removing');
    expect(() => ledger.beginCreate(NODE, 'token', -1)).toThrow('-1 addresses');
  });
});

/** What the cloud answers one call: it works, it is refused for good, or it fails for a passing reason. */
type Answer = 'ok' | 'refused' | 'throttled';
const answer = fc.constantFrom<Answer>('ok', 'refused', 'throttled');
const failure = (a: Answer, action: string) =>
  a === 'refused'
    ? new CloudError(action, 'Forbidden.RAM', 'not authorized', 'req-1')
    : new CloudError(action, 'Throttling.User', 'throttled', 'req-1');

describe('EniLifecycle with its ledger', () => {
  it('ends every record it begins, whatever the cloud answers creates, attaches and deletes', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            kind: fc.constantFrom('create' as const, 'attach' as const, 'remove' as const),
            call: answer,
            lands: fc.boolean(),
          }),
          { minLength: 1, maxLength: 6 },
        ),
        async (work) => {
          const f = fixture();
          const states = new Map<string, NetworkInterface>();
          let next = 0;
          const script = work.map((w) => ({ ...w }));
          let calls = 0;
          const answerOf = (action: string) => {
            const w = script[calls++ % script.length]!;
            return w.call === 'ok' ? Promise.resolve() : Promise.reject(failure(w.call, action));
          };
          const { l } = scriptedLifecycle(f, 'normal', {
            create: async () => {
              await answerOf('CreateNetworkInterface');
              const created = eni(10 + next++, 4, { status: 'Available', instanceId: undefined });
              states.set(created.id, created);
              return created;
            },
            attach: async () => {
              await answerOf('AttachNetworkInterface');
              for (const [id, e] of states)
                if (e.status === 'Available') states.set(id, { ...e, status: 'InUse', instanceId: 'i-a' });
            },
            state: (id) => states.get(id),
          });
          for (const [i, w] of work.entries()) {
            const parked = eni(30 + i, 3, { status: 'Available', instanceId: undefined });
            if (w.kind === 'create') l.create(pool(), 'vsw-a', 4, ['sg-1']);
            else if (w.kind === 'attach') {
              states.set(parked.id, w.lands ? { ...parked, status: 'InUse', instanceId: 'i-a' } : parked);
              l.attach(pool(), parked);
            } else {
              f.cloud.upsert(parked);
              l.remove(pool(), parked);
            }
          }
          await settle();
          // What is left are removals whose ENI the pool may still list; a publish without them ends those.
          expect(f.enis.ledger.records().filter((op) => op.phase !== 'removed')).toEqual([]);
          expect(l.inFlight(NODE)).toMatchObject({ enis: 0, ips: 0 });
          l.listed(NODE, []);
          expect(f.enis.ledger.records()).toEqual([]);
        },
      ),
      { numRuns: 150 },
    );
  });
});
