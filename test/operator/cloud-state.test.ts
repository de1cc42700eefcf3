import { describe, expect, it } from '@jest/globals';
import type { EcsApi, NetworkInterface } from '../../src/cloud/index.js';
import { silentLogger } from '../../src/observability/logger.js';
import { CloudState, FRAGMENTED_MS, TAGS } from '../../src/operator/eni/cloud-state.js';

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
  ipv6Prefixes: [],
  securityGroupIds: [],
  tags: { [TAGS.cluster]: 'c1', [TAGS.node]: 'n1' },
  creationTime: '2026-01-01T00:00:00Z',
});

/**
 * A cloud whose listing waits until `release` is called, as a long paged listing does; a read by
 * ids answers the ENIs that exist (`world`, the listing unless told otherwise).
 */
function slowCloud(listing: NetworkInterface[], world: NetworkInterface[] = listing) {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const byId: string[][] = [];
  const api = {
    async *networkInterfacePages() {
      await gate;
      yield listing;
    },
    async describeNetworkInterfaces(f: { ids?: string[] }) {
      byId.push(f.ids ?? []);
      return world.filter((e) => f.ids?.includes(e.id));
    },
  } as unknown as EcsApi;
  return { api, release, byId };
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
    // ... once a read by their ids said the two it did not list are gone.
    expect(third.byId).toEqual([['eni-a', 'eni-d']]);
  });

  it('holds a vSwitch fragmented for 10 minutes after a refused /28, or until it gives one', () => {
    let now = 1_000_000;
    const cache = new CloudState({} as EcsApi, 'vpc-1', 'c1', silentLogger(), 60_000, () => now);
    cache.fragment('vsw-a');
    now += FRAGMENTED_MS - 1;
    expect(cache.isFragmented('vsw-a')).toBe(true);
    // Its free count cannot show fragmentation: only time, or a /28 it gives, lifts the mark.
    now += 1;
    expect(cache.isFragmented('vsw-a')).toBe(false);
    cache.fragment('vsw-b');
    cache.unfragment('vsw-b');
    expect(cache.isFragmented('vsw-b')).toBe(false);
  });

  it('forgets an ENI a listing leaves out only when a read by its id says it is gone', async () => {
    // The listing misses eni-b (a lagging index, a short page); the cloud still holds it, with an address more.
    const cloud = slowCloud([eni('eni-a')], [eni('eni-a'), eni('eni-b', ['10.0.2.7'])]);
    const cache = new CloudState(cloud.api, 'vpc-1', 'c1', silentLogger());
    for (const e of [eni('eni-a'), eni('eni-b'), eni('eni-c')]) cache.upsert(e);
    cloud.release();
    await cache.fullResync();
    expect(cloud.byId).toEqual([['eni-b', 'eni-c']]);
    expect(cache.get('eni-b')!.secondaryIps).toEqual(['10.0.2.7']);
    expect(cache.get('eni-c')).toBeUndefined();
  });

  it('changes nothing when the listing fails part-way (a bad page after good ones)', async () => {
    const api = {
      async *networkInterfacePages() {
        yield [eni('eni-a')];
        throw new Error('DescribeNetworkInterfaces: Cloud.BadAnswer: NetworkInterfaceSets is missing');
      },
      describeNetworkInterfaces: async () => [],
    } as unknown as EcsApi;
    const cache = new CloudState(api, 'vpc-1', 'c1', silentLogger());
    for (const e of [eni('eni-a', ['10.0.0.9']), eni('eni-b')]) cache.upsert(e);
    await expect(cache.fullResync()).rejects.toThrow('Cloud.BadAnswer');
    expect(
      cache
        .ownedBy('n1')
        .map((e) => e.id)
        .sort(),
    ).toEqual(['eni-a', 'eni-b']);
    expect(cache.get('eni-a')!.secondaryIps).toEqual(['10.0.0.9']);
  });
});
