import { startKubeEmulator } from '../sim/kube/index.js';
import { hostPortCheck, parseHostPort, untilSignal, type CommandSpec } from './args.js';

export const emulateKube: CommandSpec = {
  name: 'emulate kube',
  summary: 'Serve an emulated Kubernetes API (v1.32) that kubectl and client-node use like a real cluster.',
  description: [
    'Prints "listening http://HOST:PORT" first and serves until SIGINT or SIGTERM.',
    'Use it with: kubectl --kubeconfig FILE get nodes (FILE from --kubeconfig-out).',
  ].join('\n'),
  flags: [
    { name: 'listen', type: 'string', value: 'HOST:PORT', default: '127.0.0.1:6443', help: 'address to listen on (port 0: any free port)', check: hostPortCheck },
    { name: 'kubeconfig-out', type: 'string', value: 'FILE', help: 'write a kubeconfig for this server to FILE' },
    { name: 'state', type: 'string', value: 'FILE', help: 'keep the objects in FILE, loaded at start and saved on change' },
    { name: 'history', type: 'number', value: 'N', default: 10000, help: 'events kept for watches that resume; older resourceVersions get 410 Expired', check: (v) => (Number.isInteger(v) && Number(v) > 0 ? undefined : 'must be a positive integer') },
  ],
  async run(flags) {
    const { host, port } = parseHostPort(String(flags.listen))!;
    const emu = await startKubeEmulator({
      host,
      port,
      kubeconfigPath: flags['kubeconfig-out'] as string | undefined,
      statePath: flags.state as string | undefined,
      historyLimit: flags.history as number,
    });
    process.stdout.write(`listening ${emu.url}\n`);
    if (emu.kubeconfigPath) process.stdout.write(`kubeconfig written to ${emu.kubeconfigPath}: kubectl --kubeconfig ${emu.kubeconfigPath} get namespaces\n`);
    await untilSignal();
    await emu.close();
    return 0;
  },
};
