import { installCni } from '../agent/install-cni.js';
import { UsageError, type CommandSpec } from './args.js';

export const installCniCommand: CommandSpec = {
  name: 'install-cni',
  summary:
    'Install eni-ipam-cni (one static binary) and a conflist on this host; ' +
    'the agent DaemonSet runs it as an init container.',
  flags: [
    { name: 'bin-dir', type: 'string', value: 'DIR', default: '/opt/cni/bin', help: 'the host’s CNI plugin folder' },
    {
      name: 'conf-dir',
      type: 'string',
      value: 'DIR',
      default: '/etc/cni/net.d',
      help: 'the host’s CNI configuration folder',
    },
    { name: 'conflist', type: 'string', value: 'FILE', help: 'the conflist to install (required)' },
  ],
  async run(f) {
    if (!f.conflist)
      throw new UsageError(
        '--conflist is required: the network configuration list to install, e.g. examples/10-eni-ipam.conflist',
      );
    let installed: string[];
    try {
      installed = installCni({
        binDir: String(f['bin-dir']),
        confDir: String(f['conf-dir']),
        conflist: String(f.conflist),
      });
    } catch (e) {
      throw new UsageError((e as Error).message);
    }
    for (const p of installed) process.stdout.write(`installed ${p}\n`);
    return 0;
  },
};
