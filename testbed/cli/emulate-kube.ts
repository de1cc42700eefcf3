import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { startControlPlane } from '../control-plane/index.js';
import { KUBERNETES_VERSION } from '../control-plane/upstream.js';
import { addressFlag, addressOf, listenFailure } from '../../src/cli/addresses.js';
import { UsageError, untilSignal, type CommandSpec } from '../../src/cli/args.js';
import { lockWorkDir, WorkDirInUse } from '../cluster/work-dir-lock.js';

/** Listens on the address and lets it go again: whether the front could take it. */
async function probeListen(host: string, port: number): Promise<void> {
  const server = createServer();
  server.listen(port, host);
  await once(server, 'listening');
  await new Promise((r) => server.close(r));
}

export const emulateKube: CommandSpec = {
  name: 'emulate kube',
  summary: `Run a Kubernetes control plane (${KUBERNETES_VERSION}: etcd, kube-apiserver, controller-manager, scheduler) on this machine.`,
  description: [
    'Prints "listening https://HOST:PORT" first and serves until SIGINT or SIGTERM. The programs are the',
    'upstream releases `npm run tools` builds (the first run builds them if it has not). TLS everywhere, with',
    'a CA made in --work-dir; certificate and service-account token authentication; the Node authorizer and',
    'RBAC. Its objects (etcd) and certificates stay in --work-dir, so a restart on the same folder keeps them.',
    'Use it with: kubectl --kubeconfig FILE get nodes (FILE from --kubeconfig-out: the admin, with the CA,',
    'which is also written beside it as ca.crt).',
  ].join('\n'),
  flags: [
    addressFlag('listen', '127.0.0.1:6443', 'address to listen on (port 0: any free port)'),
    { name: 'kubeconfig-out', type: 'string', value: 'FILE', help: 'write the admin kubeconfig to FILE' },
    {
      name: 'work-dir',
      type: 'string',
      value: 'DIR',
      default: join(tmpdir(), 'eni-ipam-kube'),
      help: 'etcd’s data, the certificates and the programs’ logs; kept across restarts',
    },
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
  ],
  async run(flags) {
    const { host, port } = addressOf(flags.listen);
    const sans =
      flags['tls-san'] === undefined
        ? []
        : String(flags['tls-san'])
            .split(',')
            .map((a) => a.trim());
    // The address first: one this host refuses is one line and exit 2, before etcd and
    // kube-apiserver take their half a minute to start.
    await probeListen(host, port).catch((e: unknown) => {
      throw listenFailure('listen', String(flags.listen), e) ?? e;
    });
    const workDir = String(flags['work-dir']);
    mkdirSync(workDir, { recursive: true });
    let unlock: () => void;
    try {
      unlock = lockWorkDir(workDir, 'control plane');
    } catch (e) {
      if (e instanceof WorkDirInUse) throw new UsageError(e.message);
      throw e;
    }
    const cp = await startControlPlane({ host, port, workDir, sans, controllers: true, scheduler: true }).catch(
      (e: unknown) => {
        unlock();
        throw listenFailure('listen', String(flags.listen), e) ?? e;
      },
    );
    // The files first: whoever waits for the listening line uses them next.
    const out = flags['kubeconfig-out'] as string | undefined;
    const ca = out && join(dirname(out), 'ca.crt');
    if (out && ca) {
      writeFileSync(out, cp.kubeconfig, { mode: 0o600 });
      copyFileSync(cp.caPath, ca);
    }
    process.stdout.write(`listening ${cp.url}\n`);
    if (out) {
      process.stdout.write(`CA certificate written to ${ca}\n`);
      process.stdout.write(`kubeconfig written to ${out}: kubectl --kubeconfig ${out} get namespaces\n`);
    }
    process.stdout.write(`logs of etcd and the Kubernetes programs in ${join(cp.workDir, 'logs')}\n`);
    await untilSignal();
    await cp.close();
    unlock();
    return 0;
  },
};
