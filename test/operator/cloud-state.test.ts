import { describe, expect, it } from '@jest/globals';
import type { EcsApi, NetworkInterface } from '../../src/cloud/index.js';
import { silentLogger } from '../../src/observability/logger.js';
import { CloudState, TAGS } from '../../src/operator/cloud-state.js';

const eni = (id: string, secondaryIps: string[] = []): NetworkInterface => ({
  id,
  mac: '00:16:3e:00:00:01',
  status: 'InUse',
  type: 'Secondary',
  vpcId: 'vpc-1',
  vSwitchId: 'vsw-1',
  zoneId: 'z',
  instanceId: 'i-1',
  primaryIp: `10.0.0.${id.length}`,
  secondaryIps,
  ipv4Prefixes: [],
  ipv6: [],
  securityGroupIds: [],
  tags: { [TAGS.cluster]: 'c1', [TAGS.node]: 'n1' },
  creationTime: '2026-01-01T00:00:00Z',
});

/** A cloud whose listing waits until `release` is called, as a long paged listing does. */
function slowCloud(listing: NetworkInterface[]) {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const api = {
    async *networkInterfacePages() {
      await gate;
      yield listing;
    },
  } as unknown as EcsApi;
  return { api, release };
}

describe('the operator’s cloud cache', () => {
  it('keeps what changed during a full resync instead of the older listing', async () => {
    const first = slowCloud([eni('eni-a'), eni('eni-b'), eni('eni-c')]);
    const cache = new CloudState(first.api, 'vpc-1', 'c1', silentLogger());
    first.release();
    await cache.fullResync();
    expect(
      cache
        .ownedBy('n1')
        .map((e) => e.id)
        .sort(),
    ).toEqual(['eni-a', 'eni-b', 'eni-c']);

    // The listing was taken before eni-d was created, eni-a got IPs and eni-b was deleted.
    const second = slowCloud([eni('eni-a'), eni('eni-b'), eni('eni-c', ['10.0.1.9'])]);
    const stale = new CloudState(second.api, 'vpc-1', 'c1', silentLogger());
    for (const e of [eni('eni-a'), eni('eni-b'), eni('eni-c')]) stale.upsert(e);
    const resync = stale.fullResync();
    stale.upsert(eni('eni-d'));
    stale.upsert(eni('eni-a', ['10.0.1.1', '10.0.1.2']));
    stale.forget('eni-b');
    second.release();
    expect(await resync).toEqual({ enis: 3, pages: 1 });
    expect(
      stale
        .ownedBy('n1')
        .map((e) => e.id)
        .sort(),
    ).toEqual(['eni-a', 'eni-c', 'eni-d']);
    expect(stale.get('eni-a')!.secondaryIps).toEqual(['10.0.1.1', '10.0.1.2']);
    // What nothing newer contradicts comes from the listing.
    expect(stale.get('eni-c')!.secondaryIps).toEqual(['10.0.1.9']);

    // The next resync, with nothing happening meanwhile, takes the listing as it is.
    const third = slowCloud([eni('eni-c')]);
    const again = new CloudState(third.api, 'vpc-1', 'c1', silentLogger());
    for (const e of [eni('eni-a'), eni('eni-d')]) again.upsert(e);
    third.release();
    await again.fullResync();
    expect(again.enisOfInstance('i-1').map((e) => e.id)).toEqual(['eni-c']);
  });
});
