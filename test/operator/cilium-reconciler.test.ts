import { describe, expect, it } from '@jest/globals';
import type { ENIPool } from '../../src/api/types.js';
import type { NetworkInterface } from '../../src/cloud/index.js';
import { VSW, eniFixture } from '../helpers/cilium-fixtures.js';
import { silentLogger } from '../../src/observability/logger.js';
import { CiliumReconciler } from '../../src/operator/cilium/reconciler.js';
import type { CiliumNode } from '../../src/operator/cilium/types.js';

const vsw = VSW;
/** Attached, with or without a device index. */
const eni = (id: string, deviceIndex: number | undefined, ips: string[]) =>
  eniFixture(id, deviceIndex, ips, { status: 'InUse' });

/** One reconcile against fakes of its ports: what it wrote, and what it said. */
function reconcilerWith(o: { pool?: ENIPool; enis: NetworkInterface[]; node?: CiliumNode; synced?: boolean }) {
  let node: CiliumNode = o.node ?? {
    metadata: { name: 'n', resourceVersion: '1' },
    spec: {
      'instance-id': 'i-1',
      'alibaba-cloud': { 'cidr-block': '10.0.0.0/8' },
      ipam: { pool: { '10.1.2.11': { resource: 'eni-2' } } },
    },
  };
  const writes: string[] = [];
  const warnings: string[] = [];
  const bump = (n: CiliumNode, what: string) => {
    writes.push(what);
    node = { ...n, metadata: { ...n.metadata, resourceVersion: String(Number(n.metadata.resourceVersion) + 1) } };
    return Promise.resolve(node);
  };
  const reconciler = new CiliumReconciler({
    cache: { pool: () => o.pool, ciliumNode: () => node },
    store: {
      read: () => Promise.resolve(node),
      replaceStatus: (n) => bump({ ...node, status: n.status }, 'status'),
      replace: (n) => bump({ ...n, status: node.status }, 'spec'),
    },
    patchPoolStatus: () => {
      writes.push('pool');
      return Promise.resolve();
    },
    cloud: { enisOfInstance: () => o.enis, vSwitches: () => Promise.resolve([vsw]) },
    mayWrite: () => true,
    cloudSynced: () => o.synced ?? true,
    warn: (_n, reason) => warnings.push(reason),
    logger: silentLogger(),
  });
  return {
    reconciler,
    writes,
    warnings,
    node: () => node,
    /** The CiliumNode deleted and made again by its agent. */
    setNode: (n: CiliumNode) => void (node = n),
  };
}

const poolWith = (status: ENIPool['status']) =>
  ({ metadata: { name: 'n' }, spec: { nodeName: 'n', instanceID: 'i-1' }, status }) as unknown as ENIPool;

describe('CiliumReconciler', () => {
  it('writes nothing while the node has no published pool: absence is no word on the agent\u2019s addresses', async () => {
    // A condition alone (a cloud outage at start writes it before any observation) is no word either.
    const outage = { conditions: [{ type: 'Degraded', status: 'True', reason: 'CloudUnreachable', message: '' }] };
    for (const pool of [undefined, poolWith(undefined), poolWith(outage as ENIPool['status'])]) {
      const r = reconcilerWith({ pool, enis: [eni('eni-1', 0, []), eni('eni-2', 1, ['10.1.2.11'])] });
      await r.reconciler.reconcile('n');
      expect(r.writes).toEqual([]);
      expect(r.node().spec.ipam?.pool).toEqual({ '10.1.2.11': { resource: 'eni-2' } });
    }
  });

  it('writes nothing before the cloud was read whole: a cold cache knows none of the node\u2019s ENIs', async () => {
    const pool = poolWith({
      enis: [{ id: 'eni-2', state: 'InUse', ips: ['10.1.2.11'] }],
      summary: { available: 1, used: 0, needed: 0 },
    } as ENIPool['status']);
    const r = reconcilerWith({ pool, enis: [], synced: false });
    await r.reconciler.reconcile('n');
    expect(r.writes).toEqual([]);
  });

  it('publishes status before pool, then leaves the node alone, and says once that an unindexed ENI is kept out', async () => {
    const pool = poolWith({
      enis: [
        { id: 'eni-2', state: 'InUse', ips: ['10.1.2.11'] },
        { id: 'eni-3', state: 'InUse', ips: ['10.1.2.21'] },
      ],
      summary: { available: 2, used: 0, needed: 0 },
    } as ENIPool['status']);
    const r = reconcilerWith({
      pool,
      enis: [eni('eni-1', 0, []), eni('eni-2', 1, ['10.1.2.11']), eni('eni-3', undefined, ['10.1.2.21'])],
    });
    await r.reconciler.reconcile('n');
    expect(r.writes).toEqual(['status']);
    expect(Object.keys(r.node().status!['alibaba-cloud']!.enis!).sort()).toEqual(['eni-1', 'eni-2']);
    expect(Object.keys(r.node().spec.ipam!.pool!)).toEqual(['10.1.2.11']);
    await r.reconciler.reconcile('n');
    expect(r.writes).toEqual(['status']);
    expect(r.warnings).toEqual(['ENIWithoutDeviceIndex']);
  });

  it('publishes nothing of a pool made for a class agents cannot use (made before the mode changed), and says so once', async () => {
    const pool = poolWith({
      enis: [{ id: 'eni-2', state: 'InUse', ips: ['10.1.2.11'] }],
      summary: { available: 1, used: 0, needed: 0 },
    } as ENIPool['status']);
    pool.spec.ipv4Mode = 'Prefix';
    const r = reconcilerWith({ pool, enis: [eni('eni-1', 0, []), eni('eni-2', 1, ['10.1.2.11'])] });
    await r.reconciler.reconcile('n');
    await r.reconciler.reconcile('n');
    expect(r.writes).toEqual([]);
    expect(r.warnings).toEqual(['UnservableByCilium']);
  });

  it('says once that an ENI on a vSwitch it does not know is listed without a CIDR, its addresses not offered', async () => {
    const pool = poolWith({
      enis: [{ id: 'eni-2', state: 'InUse', ips: ['10.1.2.11'] }],
      summary: { available: 1, used: 0, needed: 0 },
    } as ENIPool['status']);
    const lost = { ...eni('eni-2', 1, ['10.1.2.11']), vSwitchId: 'vsw-9' };
    const r = reconcilerWith({ pool, enis: [eni('eni-1', 0, []), lost] });
    await r.reconciler.reconcile('n');
    await r.reconciler.reconcile('n');
    expect(r.warnings).toEqual(['ENIWithoutVSwitchCIDR']);
    expect(r.node().status!['alibaba-cloud']!.enis!['eni-2']!.vswitch).toEqual({ 'vswitch-id': 'vsw-9', cidr: '' });
    // What the agent already had stays; nothing new is offered on that ENI.
    expect(r.node().spec.ipam?.pool).toEqual({ '10.1.2.11': { resource: 'eni-2' } });
  });

  it('keeps an address it confirmed free out of a CiliumNode made anew, though its pool cache does not show the ack yet', async () => {
    // The pool as cached: a request for .12, and no ack (the cache lags the bridge's own patch).
    const pool = poolWith({
      enis: [{ id: 'eni-2', state: 'InUse', ips: ['10.1.2.11', '10.1.2.12'] }],
      summary: { available: 2, used: 0, needed: 0 },
      releaseRequests: { '10.1.2.12': 't1' },
    } as ENIPool['status']);
    const enis = [eni('eni-1', 0, []), eni('eni-2', 1, ['10.1.2.11', '10.1.2.12'])];
    const answered: CiliumNode = {
      metadata: { name: 'n', resourceVersion: '1' },
      spec: {
        'instance-id': 'i-1',
        'alibaba-cloud': { 'cidr-block': '10.0.0.0/8' },
        ipam: { pool: { '10.1.2.11': { resource: 'eni-2' }, '10.1.2.12': { resource: 'eni-2' } } },
      },
      status: { ipam: { 'release-ips': { '10.1.2.12': 'ready-for-release' } } },
    };
    const r = reconcilerWith({ pool, enis, node: answered });
    await r.reconciler.reconcile('n');
    expect(r.writes).toContain('pool');
    // The agent's object is deleted and made again before the cache shows the ack.
    r.setNode({
      metadata: { name: 'n', resourceVersion: '9' },
      spec: { 'instance-id': 'i-1', 'alibaba-cloud': { 'cidr-block': '10.0.0.0/8' } },
    });
    await r.reconciler.reconcile('n');
    expect(Object.keys(r.node().spec.ipam?.pool ?? {})).toEqual(['10.1.2.11']);
  });
});
