import { describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { containerScript, type ContainerSpec } from '../../../testbed/cluster/runtime/container.js';

/*
 * The emulated kubelet's capabilities, as a container sees them: the exec line of the container
 * script (setpriv with the securityContext's user and capabilities) run for real, without the
 * chroot, reading the process's own capability sets.
 */
const spec = (o: Partial<ContainerSpec>): ContainerSpec => ({
  name: 'c',
  stageDir: '/tmp/none',
  netns: 'none',
  hostname: 'c',
  checkout: '/tmp',
  workdir: '/app',
  argv: ['grep', '-E', '^Cap(Eff|Bnd):', '/proc/self/status'],
  env: {},
  mounts: [],
  uid: 0,
  gid: 0,
  groups: [],
  readOnlyRoot: false,
  dropAllCaps: true,
  noNewPrivs: true,
  ...o,
});

/** CapEff and CapBnd of the container's process, as bit masks. */
function caps(c: ContainerSpec): { eff: bigint; bnd: bigint } {
  const exec = containerScript(c).split('\n').at(-1)!;
  // Everything but the chroot into the staged root, which needs the whole pod set up.
  const line = exec.replace(/^exec chroot '[^']*' env -C '[^']*' /, 'exec ');
  const out = execFileSync('sh', ['-c', line], { encoding: 'utf8' });
  const mask = (k: string) => BigInt(`0x${new RegExp(`^${k}:\\s*([0-9a-f]+)$`, 'm').exec(out)![1]}`);
  return { eff: mask('CapEff'), bnd: mask('CapBnd') };
}

const NET_ADMIN = 1n << 12n;
const NET_RAW = 1n << 13n;
const root = process.getuid?.() === 0;

(root ? describe : describe.skip)('container capabilities (root)', () => {
  it('drops every capability for drop: [ALL], and keeps exactly those of capabilities.add', () => {
    expect(caps(spec({}))).toEqual({ eff: 0n, bnd: 0n });
    expect(caps(spec({ addCaps: ['NET_ADMIN'] }))).toEqual({ eff: NET_ADMIN, bnd: NET_ADMIN });
    expect(caps(spec({ addCaps: ['CAP_NET_ADMIN', 'NET_RAW'] }))).toEqual({
      eff: NET_ADMIN | NET_RAW,
      bnd: NET_ADMIN | NET_RAW,
    });
  });
});
