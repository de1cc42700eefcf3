import { startKubeEmulator } from '../kube/index.js';
import { addressFlag, addressOf, listenFailure } from '../../src/cli/addresses.js';
import { untilSignal, type CommandSpec } from '../../src/cli/args.js';

export const emulateKube: CommandSpec = {
  name: 'emulate kube',
  summary: 'Serve an emulated Kubernetes API (v1.32) that kubectl and client-node use like a real cluster.',
  description: [
    'Prints "listening http://HOST:PORT" (https with --tls) first and serves until SIGINT or SIGTERM.',
    'Use it with: kubectl --kubeconfig FILE get nodes (FILE from --kubeconfig-out).',
    'With --tls it makes a CA at start, serves HTTPS for 127.0.0.1, localhost, kubernetes.default.svc and',
    'the --tls-san addresses, and writes the CA beside the kubeconfig as ca.crt (the kubeconfig carries it and',
    "the admin's client certificate). With --auth it authenticates requests (admin credentials, service-account",
    'tokens from TokenRequest; anyone else is system:anonymous) and authorizes them with RBAC.',
  ].join('\n'),
  flags: [
    addressFlag('listen', '127.0.0.1:6443', 'address to listen on (port 0: any free port)'),
    { name: 'kubeconfig-out', type: 'string', value: 'FILE', help: 'write a kubeconfig for this server to FILE' },
    {
      name: 'state',
      type: 'string',
      value: 'FILE',
      help: 'keep the objects in FILE, loaded at start and saved on change',
    },
    { name: 'tls', type: 'boolean', help: 'serve HTTPS with a CA made at start (ca.crt beside --kubeconfig-out)' },
    {
      name: 'tls-san',
      type: 'string',
      value: 'ADDR[,ADDR...]',
      help: 'more IP addresses or DNS names for the serving certificate (e.g. a bridge address pods reach)',
      check: (v) =>
        String(v)
          .split(',')
          .every((a) => a.trim() !== '')
          ? undefined
          : 'must be a comma-separated list of addresses or names',
    },
    {
      name: 'auth',
      type: 'boolean',
      help:
        'require credentials and authorize every request with RBAC ' +
        '(the kubeconfig stays cluster-admin); needs --tls',
    },
    {
      name: 'history',
      type: 'number',
      value: 'N',
      default: 10000,
      help: 'events kept for watches that resume; older resourceVersions get 410 Expired',
      check: (v) => (Number.isInteger(v) && Number(v) > 0 ? undefined : 'must be a positive integer'),
    },
  ],
  async run(flags) {
    const { host, port } = addressOf(flags.listen);
    const sans =
      flags['tls-san'] === undefined
        ? []
        : String(flags['tls-san'])
            .split(',')
            .map((a) => a.trim());
    if (sans.length && !flags.tls) {
      process.stderr.write('eni-ipam emulate kube: --tls-san needs --tls\n');
      return 2;
    }
    if (flags.auth && !flags.tls) {
      process.stderr.write(
        'eni-ipam emulate kube: --auth needs --tls (kubectl and client-go send credentials only over HTTPS)\n',
      );
      return 2;
    }
    const emu = await startKubeEmulator({
      host,
      port,
      kubeconfigPath: flags['kubeconfig-out'] as string | undefined,
      statePath: flags.state as string | undefined,
      historyLimit: flags.history as number,
      tls: flags.tls ? { sans } : false,
      auth: Boolean(flags.auth),
    }).catch((e: unknown) => {
      throw listenFailure('listen', String(flags.listen), e) ?? e;
    });
    process.stdout.write(`listening ${emu.url}\n`);
    if (emu.caPath) process.stdout.write(`CA certificate written to ${emu.caPath}\n`);
    if (emu.kubeconfigPath)
      process.stdout.write(
        `kubeconfig written to ${emu.kubeconfigPath}: kubectl --kubeconfig ${emu.kubeconfigPath} get namespaces\n`,
      );
    await untilSignal();
    await emu.close();
    return 0;
  },
};
