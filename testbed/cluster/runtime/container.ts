/* eslint-disable @typescript-eslint/no-explicit-any */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Mount } from './volumes.js';

/** What eni-ipam's image is, as a container runtime reads it from the image config. */
export interface ImageConfig {
  /** Repositories taken for eni-ipam's image (any tag or digest): the chart's default and a local build. */
  repositories: string[];
  workdir: string;
  entrypoint: string[];
  /** The image's CMD: the arguments when the pod gives neither command nor args. */
  cmd?: string[];
  user: number;
  group: number;
  env: Record<string, string>;
}

export const IMAGE_REPOSITORIES = ['ghcr.io/eni-ipam/eni-ipam', 'eni-ipam', 'docker.io/library/eni-ipam'];
export const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/**
 * The image config of the checkout's Dockerfile (its last stage: WORKDIR, ENTRYPOINT, USER,
 * ENV), so that the emulated nodes run exactly what the image would.
 */
export function imageConfig(checkout: string): ImageConfig {
  const text = readFileSync(join(checkout, 'Dockerfile'), 'utf8').replace(/\\\n/g, ' ');
  const stages = text.split(/^FROM\s/m);
  const last = stages.at(-1)!;
  const cfg: ImageConfig = {
    repositories: IMAGE_REPOSITORIES,
    workdir: '/',
    entrypoint: [],
    user: 0,
    group: 0,
    env: { PATH: DEFAULT_PATH },
  };
  for (const line of last.split('\n')) {
    const m = /^(WORKDIR|ENTRYPOINT|USER|ENV)\s+(.*)$/.exec(line.trim());
    if (!m) continue;
    const arg = m[2]!.trim();
    if (m[1] === 'WORKDIR') cfg.workdir = arg;
    if (m[1] === 'ENTRYPOINT') {
      try {
        cfg.entrypoint = JSON.parse(arg);
      } catch {
        cfg.entrypoint = ['/bin/sh', '-c', arg];
      }
    }
    if (m[1] === 'USER') {
      const [u, g] = arg.split(':');
      cfg.user = Number(u);
      cfg.group = Number(g ?? u);
    }
    if (m[1] === 'ENV')
      for (const kv of arg.match(/\S+=("[^"]*"|\S+)/g) ?? [])
        cfg.env[kv.slice(0, kv.indexOf('='))] = kv.slice(kv.indexOf('=') + 1).replace(/^"|"$/g, '');
  }
  if (!cfg.entrypoint.length) throw new Error(`${join(checkout, 'Dockerfile')} has no ENTRYPOINT in its last stage`);
  if (Number.isNaN(cfg.user) || Number.isNaN(cfg.group))
    throw new Error(`${join(checkout, 'Dockerfile')}: USER must be numeric (uid:gid)`);
  return cfg;
}

/**
 * The repository of an image reference: `ghcr.io/eni-ipam/eni-ipam:0.1.0@sha256:...` is
 * `ghcr.io/eni-ipam/eni-ipam`.
 */
export function imageRepository(image: string): string {
  const noDigest = image.split('@')[0]!;
  const lastSlash = noDigest.lastIndexOf('/');
  const colon = noDigest.lastIndexOf(':');
  return colon > lastSlash ? noDigest.slice(0, colon) : noDigest;
}

export const runsImage = (image: string): boolean => IMAGE_REPOSITORIES.includes(imageRepository(image));

/** A line of a container's output, for `kubectl logs`. */
export interface LogLine {
  at: string;
  text: string;
}

export class LogBuffer {
  readonly lines: LogLine[] = [];
  private readonly followers = new Set<(l: LogLine) => void>();
  private readonly enders = new Set<() => void>();
  private partial = '';
  /** The container has exited: nothing more comes. */
  ended = false;
  constructor(private readonly limit = 5000) {}

  write(chunk: Buffer): void {
    const text = this.partial + chunk.toString('utf8');
    const parts = text.split('\n');
    this.partial = parts.pop()!;
    for (const p of parts) this.push(p);
  }

  flush(): void {
    if (this.partial) this.push(this.partial);
    this.partial = '';
  }

  private push(text: string): void {
    const l = { at: new Date().toISOString(), text };
    this.lines.push(l);
    if (this.lines.length > this.limit) this.lines.splice(0, this.lines.length - this.limit);
    for (const f of this.followers) f(l);
  }

  /** The container exited: followers are told, and the buffer keeps what it has. */
  end(): void {
    this.flush();
    this.ended = true;
    for (const e of this.enders) e();
    this.enders.clear();
    this.followers.clear();
  }

  /** Calls `f` with each new line and `onEnd` when the container exits (at once if it has). */
  follow(f: (l: LogLine) => void, onEnd: () => void): () => void {
    if (this.ended) {
      onEnd();
      return () => undefined;
    }
    this.followers.add(f);
    this.enders.add(onEnd);
    return () => {
      this.followers.delete(f);
      this.enders.delete(onEnd);
    };
  }
}

export interface ContainerSpec {
  name: string;
  /** Where this container's private root is staged on the machine. */
  stageDir: string;
  /** The network namespace to run in. */
  netns: string;
  hostname: string;
  /** The checkout, mounted read-only at `workdir` (eni-ipam's image); none for an image of the machine's own tools. */
  checkout?: string;
  /** Where the image keeps the app (the checkout is mounted there) and starts. */
  workdir: string;
  argv: string[];
  env: Record<string, string>;
  mounts: Mount[];
  uid: number;
  gid: number;
  groups: number[];
  readOnlyRoot: boolean;
  dropAllCaps: boolean;
  /** securityContext.capabilities.add (NET_ADMIN or CAP_NET_ADMIN): kept in the bounding set when ALL is dropped. */
  addCaps?: string[];
  noNewPrivs: boolean;
}

/** setpriv's names of Kubernetes capability names (NET_ADMIN, CAP_NET_ADMIN -> +net_admin). */
function setprivCaps(caps: string[] | undefined): string {
  return (caps ?? [])
    .map((c) => c.toLowerCase().replace(/^cap_/, ''))
    .filter((c) => /^[a-z_]+$/.test(c))
    .map((c) => `,+${c}`)
    .join('');
}

/**
 * A path inside the container's root, with symbolic links resolved as they would be inside
 * it (the root is an overlay of the machine's, so the machine's links are the root's):
 * /var/run/secrets is /run/secrets on Debian, and must never lead out of the root.
 */
export function inRoot(path: string, fsRoot = '/'): string {
  const parts = path.split('/').filter(Boolean);
  const out: string[] = [];
  for (let i = 0, hops = 0; i < parts.length; i++) {
    const part = parts[i]!;
    if (part === '.') continue;
    if (part === '..') {
      out.pop();
      continue;
    }
    const here = join(fsRoot, ...out, part);
    let link: string | undefined;
    try {
      link = lstatSync(here).isSymbolicLink() ? readlinkSync(here) : undefined;
    } catch {
      link = undefined;
    }
    if (link !== undefined && hops++ < 40) {
      const rest = parts.slice(i + 1);
      const target = link.split('/').filter(Boolean);
      if (link.startsWith('/')) out.length = 0;
      parts.splice(0, parts.length, ...out, ...target, ...rest);
      out.length = 0;
      i = -1;
      continue;
    }
    out.push(part);
  }
  return `/${out.join('/')}`;
}

const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * The shell script that builds a container's root in a private mount namespace: a
 * copy-on-write overlay of the machine's root (so mount points can be made anywhere without
 * touching the machine), /dev, /proc and /sys, a fresh /run, a fresh /tmp (unless the root is
 * read-only), the checkout read-only at its workdir (eni-ipam's image; not the toolbox),
 * the volumes at their mountPaths; then the hostname, chroot, and the user, groups and
 * capabilities of the securityContext.
 */
export function containerScript(c: ContainerSpec): string {
  const S = c.stageDir;
  const R = `${S}/root`;
  const lines = [
    'set -e',
    `mount -t tmpfs -o mode=755 tmpfs ${q(S)}`,
    `mkdir ${q(`${S}/upper`)} ${q(`${S}/work`)} ${q(R)}`,
    `mount -t overlay overlay -o ${q(`lowerdir=/,upperdir=${S}/upper,workdir=${S}/work`)} ${q(R)}`,
    `mount --rbind /dev ${q(`${R}/dev`)}`,
    `mount --rbind /proc ${q(`${R}/proc`)}`,
    `mount --rbind /sys ${q(`${R}/sys`)}`,
    // A /run of its own: the machine's holds its network namespaces' names, among others.
    `mount -t tmpfs -o mode=755 tmpfs ${q(`${R}/run`)}`,
    // A writable /tmp only where the root is writable, as on a node.
    ...(c.readOnlyRoot ? [] : [`mount -t tmpfs -o mode=1777 tmpfs ${q(`${R}/tmp`)}`]),
    ...(c.checkout
      ? [
          `mkdir -p ${q(`${R}${c.workdir}`)} && ` +
            `mount --bind ${q(c.checkout)} ${q(`${R}${c.workdir}`)} && ` +
            `mount -o remount,bind,ro ${q(`${R}${c.workdir}`)}`,
        ]
      : []),
  ];
  for (const m of c.mounts) {
    const target = `${R}${inRoot(m.target)}`;
    const isFile = existsSync(m.source) && !statSync(m.source).isDirectory();
    lines.push(isFile ? `mkdir -p "$(dirname ${q(target)})" && touch ${q(target)}` : `mkdir -p ${q(target)}`);
    lines.push(`mount ${m.recursive ? '--rbind' : '--bind'} ${q(m.source)} ${q(target)}`);
    if (m.readOnly) lines.push(`mount -o remount,bind,ro ${q(target)}`);
  }
  if (c.readOnlyRoot) lines.push(`mount -o remount,ro ${q(R)}`);
  lines.push(`hostname ${q(c.hostname)}`);
  lines.push(`exec chroot ${q(R)} env -C ${q(c.workdir)} ${[...setprivArgv(c), ...c.argv].map(q).join(' ')}`);
  return lines.join('\n');
}

/** setpriv's command line (up to `--`) that gives a process the container's user, groups and capabilities. */
export function setprivArgv(c: ContainerSpec): string[] {
  return [
    'setpriv',
    `--reuid=${c.uid}`,
    `--regid=${c.gid}`,
    c.groups.length ? `--groups=${c.groups.join(',')}` : '--clear-groups',
    ...(c.dropAllCaps
      ? [`--inh-caps=-all${setprivCaps(c.addCaps)}`, `--bounding-set=-all${setprivCaps(c.addCaps)}`]
      : []),
    ...(c.noNewPrivs ? ['--no-new-privs'] : []),
    // The container dies with the runtime that started it, even when that is killed.
    '--pdeathsig=KILL',
    '--',
  ];
}

/** Starts a container: its process is the entrypoint itself (every step execs), so signals reach it. */
/**
 * nsenter's arguments for a shell script in the pod's network namespace, with a mount and UTS
 * namespace of its own: private, or a slave of the machine's where a mount asks for the
 * machine's later mounts (mountPropagation HostToContainer), as a runtime makes it rslave.
 */
export function inPodNamespaces(netns: string, script: string, fromHost = false): string[] {
  return [
    ...[`--net=/run/netns/${netns}`, '--'],
    ...['unshare', '--mount', '--uts', '--propagation', fromHost ? 'slave' : 'private', '--'],
    ...['/bin/sh', '-c', script],
  ];
}

export function startContainer(c: ContainerSpec, log: LogBuffer): ChildProcess {
  mkdirSync(c.stageDir, { recursive: true });
  const child = spawn(
    'nsenter',
    inPodNamespaces(
      c.netns,
      containerScript(c),
      c.mounts.some((m) => m.fromHost),
    ),
    {
      env: c.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  child.stdout!.on('data', (d: Buffer) => log.write(d));
  child.stderr!.on('data', (d: Buffer) => log.write(d));
  child.on('close', () => log.end());
  return child;
}

/**
 * The command line of a container, as Kubernetes combines it with the image: `command` replaces
 * the entrypoint (and drops the image's CMD), `args` replace the CMD.
 */
export function containerArgv(container: any, image: ImageConfig): string[] {
  if (container.command) return [...container.command, ...(container.args ?? [])];
  return [...image.entrypoint, ...(container.args ?? image.cmd ?? [])];
}
