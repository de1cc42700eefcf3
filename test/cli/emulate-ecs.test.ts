import { once } from 'node:events';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { defaultWorld } from '../../testbed/ecs/index.js';
import { runCli, startCli } from '../helpers/cli.js';
import { REGION, pop } from '../helpers/ecs.js';

describe('eni-ipam CLI', () => {
  it('describes its commands and every flag', async () => {
    const top = await runCli(['--help']);
    expect(top.code).toBe(0);
    expect(top.stdout).toContain('emulate ecs');
    const help = await runCli(['emulate', 'ecs', '--help']);
    expect(help.code).toBe(0);
    for (const flag of ['--fixture FILE', '--listen HOST:PORT', '--time-scale K', '--help'])
      expect(help.stdout).toContain(flag);
    const none = await runCli([]);
    expect(none.code).toBe(2);
  });

  it.each([
    [['emulate', 'ecs', '--bogus'], /^eni-ipam emulate ecs: unknown flag --bogus/],
    [['emulate', 'ecs', '--listen', 'nowhere'], /--listen takes HOST:PORT/],
    [['emulate', 'ecs', '--time-scale', '-3'], /--time-scale must be greater than 0/],
    [['emulate', 'ecs', '--time-scale'], /--time-scale needs a value/],
    [['emulate', 'gce'], /unknown command "emulate gce"/],
  ])('exits 2 with a one-line message for %j', async (args, message) => {
    const r = await runCli(args);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(message);
  });

  it('exits 2 naming the field of a bad fixture', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cli-'));
    const world = defaultWorld();
    world.instances[2]!.vSwitchId = 'vsw-gone';
    writeFileSync(join(dir, 'bad.json'), JSON.stringify(world));
    const r = await runCli(['emulate', 'ecs', '--fixture', join(dir, 'bad.json'), '--listen', '127.0.0.1:0']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/instances\[2\]\.vSwitchId: "vsw-gone" is not in vSwitches/);
  });

  it('serves the default world until SIGTERM', async () => {
    const { child, url } = await startCli(['emulate', 'ecs', '--listen', '127.0.0.1:0']);
    try {
      const r = (await pop(url).request('DescribeInstances', { RegionId: REGION, MaxResults: 100 })) as {
        Instances: { Instance: unknown[] };
      };
      expect(r.Instances.Instance.length).toBeGreaterThanOrEqual(12);
    } finally {
      child.kill('SIGTERM');
    }
    const [code] = await once(child, 'exit');
    expect(code).toBe(0);
  });

  it('serves a fixture file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cli-'));
    const world = defaultWorld();
    world.region = 'cn-shanghai';
    writeFileSync(join(dir, 'world.json'), JSON.stringify(world));
    const { child, url } = await startCli([
      'emulate',
      'ecs',
      '--fixture',
      join(dir, 'world.json'),
      '--listen',
      '127.0.0.1:0',
    ]);
    try {
      await expect(pop(url).request('DescribeInstances', { RegionId: 'cn-shanghai' })).resolves.toBeDefined();
    } finally {
      child.kill('SIGINT');
    }
    expect((await once(child, 'exit'))[0]).toBe(0);
  });
});
