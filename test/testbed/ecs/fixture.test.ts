import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import {
  FixtureError,
  defaultWorld,
  loadFixtureFile,
  validateFixture,
  type Fixture,
} from '../../../testbed/ecs/index.js';

const broken = (patch: (f: Fixture) => void): string => {
  const f = defaultWorld();
  patch(f);
  try {
    validateFixture(f);
  } catch (e) {
    expect(e).toBeInstanceOf(FixtureError);
    return (e as Error).message;
  }
  throw new Error('fixture was accepted');
};

describe('fixture validation', () => {
  it('accepts the default world, and a type with jumbo frames', () => {
    const jumbo = defaultWorld();
    jumbo.instanceTypes[0]!.mtu = 8500;
    expect(validateFixture(jumbo).instanceTypes[0]!.mtu).toBe(8500);
    const f = validateFixture(defaultWorld());
    expect(f.instances.length).toBeGreaterThanOrEqual(12);
    expect(new Set(f.vSwitches.map((v) => v.zoneId)).size).toBeGreaterThanOrEqual(2);
  });

  it.each<[string, (f: Fixture) => void, RegExp]>([
    [
      'an unknown field',
      (f) => ((f.vSwitches[1] as Record<string, unknown>).colour = 'red'),
      /^vSwitches\[1\]: unknown field "colour"$/,
    ],
    ['a missing field', (f) => delete (f as Partial<Fixture>).region, /missing required field "region"/],
    [
      'a malformed CIDR',
      (f) => (f.vSwitches[0]!.cidr = '192.168.0.0'),
      /^vSwitches\[0\]\.cidr: "192\.168\.0\.0" is not a valid value/,
    ],
    [
      'a vSwitch outside its VPC',
      (f) => (f.vSwitches[0]!.cidr = '10.0.0.0/24'),
      /^vSwitches\[0\]\.cidr: 10\.0\.0\.0\/24 is outside VPC vpc-demo/,
    ],
    [
      'overlapping vSwitches',
      (f) => (f.vSwitches[2]!.cidr = '192.168.16.0/24'),
      /^vSwitches\[2\]\.cidr: .* overlaps vSwitches\[1\]/,
    ],
    [
      'an unknown instance type',
      (f) => (f.instances[3]!.instanceType = 'ecs.nope'),
      /^instances\[3\]\.instanceType: "ecs\.nope" is not in instanceTypes$/,
    ],
    [
      'an MTU no instance type has',
      (f) => (f.instanceTypes[0]!.mtu = 9000 as 8500),
      /^instanceTypes\[0\]\.mtu: must be equal to one of the allowed values \[1500,8500\]$/,
    ],
    ['a duplicate id', (f) => (f.instances[4]!.id = 'i-demo-01'), /^instances\[4\]\.id: duplicate id "i-demo-01"$/],
    ['a negative quota', (f) => (f.quotas!.enisPerRegion = -1), /^quotas\.enisPerRegion: must be >= 0$/],
    [
      'a bad fault rate',
      (f) => (f.faults = { rules: [{ kind: 'error', code: 'X', rate: 3 }] }),
      /^faults\.rules\[0\]\.rate: must be <= 1$/,
    ],
  ])('names the field of %s', (_, patch, message) => {
    expect(broken(patch)).toMatch(message);
  });

  it('reads YAML and JSON files and reports unreadable ones', () => {
    const dir = mkdtempSync(join(tmpdir(), 'fixture-'));
    const yamlPath = join(dir, 'w.yaml');
    writeFileSync(
      yamlPath,
      'region: r1\ncredentials: [{accessKeyId: a, accessKeySecret: b}]\nvpcs: [{id: v, cidr: 10.0.0.0/8}]\nvSwitches: [{id: s, vpcId: v, zoneId: z, cidr: 10.1.0.0/24}]\nsecurityGroups: []\ninstanceTypes: [{id: t, cpuCores: 2, memoryGiB: 4, eniQuantity: 2, eniPrivateIpAddressQuantity: 2, eniIpv6AddressQuantity: 0}]\ninstances: []\n',
    );
    expect(loadFixtureFile(yamlPath).region).toBe('r1');
    const jsonPath = join(dir, 'w.json');
    writeFileSync(jsonPath, JSON.stringify(defaultWorld()));
    expect(loadFixtureFile(jsonPath).region).toBe('cn-hangzhou');
    writeFileSync(join(dir, 'bad.yaml'), 'region: [unclosed');
    expect(() => loadFixtureFile(join(dir, 'bad.yaml'))).toThrow(/is not valid YAML or JSON/);
    expect(() => loadFixtureFile(join(dir, 'missing.yaml'))).toThrow(/cannot read fixture/);
  });
});
