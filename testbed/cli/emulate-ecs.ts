import { FixtureError, loadFixtureFile, startEcsEmulator } from '../ecs/index.js';
import { addressFlag, addressOf, listenFailure } from '../../src/cli/addresses.js';
import { UsageError, untilSignal, type CommandSpec } from '../../src/cli/args.js';

export const emulateEcs: CommandSpec = {
  name: 'emulate ecs',
  summary: 'Serve an emulated ECS/VPC OpenAPI (2014-05-26 and 2016-04-28) for one region.',
  description: [
    'Prints "listening http://HOST:PORT" first and serves until SIGINT or SIGTERM.',
    'Without --fixture the default world is served: region cn-hangzhou, AccessKeyId demo,',
    'secret demo-secret (see testbed/README.md). Faults and state: GET/PUT/DELETE /_emulator/faults,',
    'GET /_emulator/state, GET /_emulator/stats.',
  ].join('\n'),
  flags: [
    { name: 'fixture', type: 'string', value: 'FILE', help: 'YAML or JSON world to serve' },
    addressFlag('listen', '127.0.0.1:9100', 'address to listen on (port 0: any free port)'),
    {
      name: 'time-scale',
      type: 'number',
      value: 'K',
      help: "run quotas and delays K times faster (overrides the fixture's timeScale)",
      check: (v) => (Number(v) > 0 ? undefined : 'must be greater than 0'),
    },
  ],
  async run(flags) {
    let fixture;
    try {
      fixture = flags.fixture ? loadFixtureFile(String(flags.fixture)) : undefined;
    } catch (e) {
      if (e instanceof FixtureError) throw new UsageError(e.message);
      throw e;
    }
    const { host, port } = addressOf(flags.listen);
    const emu = await startEcsEmulator({
      fixture,
      host,
      port,
      timeScale: flags['time-scale'] as number | undefined,
    }).catch((e: unknown) => {
      throw listenFailure('listen', String(flags.listen), e) ?? e;
    });
    process.stdout.write(`listening ${emu.url}\n`);
    process.stdout.write(
      `region ${emu.fixture.region}; admin ${emu.url}/_emulator/state; time scale ${emu.clock.scale}\n`,
    );
    await untilSignal();
    await emu.close();
    return 0;
  },
};
