/* eslint-disable @typescript-eslint/no-explicit-any */
import { chownSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { KubeObject } from '../../kube/core/types.js';
import type { KubeletObjects } from './node-api.js';

/** Mints a service-account token for a pod (the TokenRequest API, bound to the pod). */
export type TokenMinter = (r: {
  namespace: string;
  serviceAccountName: string;
  audiences: string[];
  expirationSeconds: number;
  pod: { name: string; uid: string };
  node: string;
}) => Promise<{ token: string; expirationTimestamp: string }>;

/** A volume mounted in a container: a directory (or file) on the machine and where it goes. */
export interface Mount {
  source: string;
  target: string;
  readOnly: boolean;
  /** With the mounts below the source (a folder of namespace files, say). */
  recursive?: boolean;
  /** mountPropagation HostToContainer: mounts made on the machine later appear in the container (rslave). */
  fromHost?: boolean;
}

/**
 * Where a node keeps its pods' network namespaces (CNI_NETNS): the emulated runtime makes them in
 * the machine's /run/netns, so a hostPath of either name is that folder, with its namespace mounts.
 */
const NETNS_DIRS = ['/var/run/netns', '/run/netns'];
export const MACHINE_NETNS_DIR = '/run/netns';

/** Whether a hostPath is the node's folder of pods' network namespaces (the machine's, not under the node's root). */
export const isNetnsDir = (path: string): boolean => NETNS_DIRS.includes(path.replace(/\/+$/, ''));

/** A projected token to rewrite before it expires (at 80% of its life, as the kubelet does). */
export interface TokenFile {
  path: string;
  refresh: () => Promise<void>;
  expirationSeconds: number;
}

/** A volume that cannot be set up yet (a missing Secret, say): the pod waits in ContainerCreating. */
export class MountError extends Error {}

export interface VolumeContext {
  objects: KubeletObjects;
  pod: KubeObject;
  node: string;
  hostIP: string;
  podIP: string;
  /** Where the pod's volumes live on the machine. */
  podDir: string;
  /** The node's root: hostPath volumes map under it. */
  nodeRoot: string;
  mint: TokenMinter;
  /** The API server's CA (PEM) for ca.crt; empty when it serves plain HTTP. */
  caCert: string;
}

const b64 = (s: string) => Buffer.from(s, 'base64');

function writeFile(ctx: VolumeContext, path: string, data: string | Buffer, mode: number): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o755 });
  writeFileSync(path, data, { mode });
  const fsGroup = ctx.pod.spec?.securityContext?.fsGroup;
  if (fsGroup !== undefined) chownSync(path, 0, fsGroup);
}

/**
 * The value of a downward-API fieldRef (metadata.name/namespace/uid/labels/annotations,
 * spec.nodeName, spec.serviceAccountName, status.podIP/hostIP).
 */
export function fieldValue(ctx: { pod: KubeObject; hostIP: string; podIP: string }, fieldPath: string): string {
  const p = ctx.pod;
  const m = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(fieldPath);
  if (m) return p.metadata[m[1]!]?.[m[2]!] ?? '';
  switch (fieldPath) {
    case 'metadata.name':
      return p.metadata.name ?? '';
    case 'metadata.namespace':
      return p.metadata.namespace ?? '';
    case 'metadata.uid':
      return p.metadata.uid ?? '';
    case 'metadata.labels':
      return Object.entries(p.metadata.labels ?? {})
        .map(([k, v]) => `${k}="${String(v)}"`)
        .join('\n');
    case 'metadata.annotations':
      return Object.entries(p.metadata.annotations ?? {})
        .map(([k, v]) => `${k}="${String(v)}"`)
        .join('\n');
    case 'spec.nodeName':
      return p.spec?.nodeName ?? '';
    case 'spec.serviceAccountName':
      return p.spec?.serviceAccountName ?? '';
    case 'status.podIP':
    case 'status.podIPs':
      return ctx.podIP;
    case 'status.hostIP':
    case 'status.hostIPs':
      return ctx.hostIP;
    default:
      throw new MountError(`unsupported fieldPath "${fieldPath}"`);
  }
}

function dataOf(
  ctx: VolumeContext,
  kind: 'secrets' | 'configmaps',
  name: string,
  optional: boolean,
): Record<string, Buffer> | undefined {
  const o = ctx.objects.get(kind, ctx.pod.metadata.namespace, name);
  if (!o) {
    if (optional) return undefined;
    throw new MountError(`${kind === 'secrets' ? 'secret' : 'configmap'} "${name}" not found`);
  }
  const out: Record<string, Buffer> = {};
  if (kind === 'secrets') for (const [k, v] of Object.entries(o.data ?? {})) out[k] = b64(String(v));
  for (const [k, v] of Object.entries(o.stringData ?? {})) out[k] = Buffer.from(String(v));
  if (kind === 'configmaps') {
    for (const [k, v] of Object.entries(o.data ?? {})) out[k] = Buffer.from(String(v));
    for (const [k, v] of Object.entries(o.binaryData ?? {})) out[k] = b64(String(v));
  }
  return out;
}

function writeKeys(
  ctx: VolumeContext,
  dir: string,
  data: Record<string, Buffer>,
  items: any[] | undefined,
  mode: number,
  what: string,
): void {
  if (items?.length) {
    for (const it of items) {
      const v = data[it.key];
      if (v === undefined) throw new MountError(`${what}: key "${it.key}" not found`);
      writeFile(ctx, join(dir, it.path), v, it.mode ?? mode);
    }
  } else for (const [k, v] of Object.entries(data)) writeFile(ctx, join(dir, k), v, mode);
}

async function tokenFile(
  ctx: VolumeContext,
  path: string,
  audience: string | undefined,
  expirationSeconds: number,
  mode: number,
  tokens: TokenFile[],
): Promise<void> {
  const refresh = async () => {
    const t = await ctx
      .mint({
        namespace: ctx.pod.metadata.namespace!,
        serviceAccountName: ctx.pod.spec?.serviceAccountName ?? 'default',
        audiences: audience ? [audience] : [],
        expirationSeconds,
        pod: { name: ctx.pod.metadata.name!, uid: ctx.pod.metadata.uid! },
        node: ctx.node,
      })
      .catch((e: Error) => {
        throw new MountError(`failed to fetch token: ${e.message}`);
      });
    writeFile(ctx, path, t.token, mode);
  };
  await refresh();
  tokens.push({ path, refresh, expirationSeconds });
}

async function projected(ctx: VolumeContext, dir: string, v: any, tokens: TokenFile[]): Promise<void> {
  const mode = v.defaultMode ?? 0o644;
  for (const s of v.sources ?? []) {
    if (s.serviceAccountToken)
      await tokenFile(
        ctx,
        join(dir, s.serviceAccountToken.path),
        s.serviceAccountToken.audience,
        s.serviceAccountToken.expirationSeconds ?? 3600,
        mode,
        tokens,
      );
    if (s.secret) {
      const d = dataOf(ctx, 'secrets', s.secret.name, Boolean(s.secret.optional));
      if (d) writeKeys(ctx, dir, d, s.secret.items, mode, `secret "${s.secret.name}"`);
    }
    if (s.configMap) {
      const d = dataOf(ctx, 'configmaps', s.configMap.name, Boolean(s.configMap.optional));
      if (d) writeKeys(ctx, dir, d, s.configMap.items, mode, `configmap "${s.configMap.name}"`);
    }
    if (s.downwardAPI)
      for (const it of s.downwardAPI.items ?? [])
        writeFile(ctx, join(dir, it.path), fieldValue(ctx, it.fieldRef?.fieldPath ?? ''), it.mode ?? mode);
  }
}

/**
 * Sets up a pod's volumes under its directory: Secret, ConfigMap, projected (service-account
 * token, Secret, ConfigMap, downward API), downwardAPI, emptyDir, and hostPath under the
 * node's root; plus the service-account volume the API server adds to every pod (token,
 * ca.crt, namespace) unless automountServiceAccountToken is false.
 */
export async function setUpVolumes(ctx: VolumeContext, tokens: TokenFile[]): Promise<Map<string, string>> {
  const dirs = new Map<string, string>();
  const volumes: any[] = [...(ctx.pod.spec?.volumes ?? [])];
  for (const v of volumes) {
    const dir = join(ctx.podDir, 'volumes', v.name);
    const fail = (e: Error) => new MountError(`MountVolume.SetUp failed for volume "${v.name}" : ${e.message}`);
    try {
      if (v.hostPath && isNetnsDir(v.hostPath.path)) {
        dirs.set(v.name, MACHINE_NETNS_DIR);
        continue;
      }
      if (v.hostPath) {
        const path = join(ctx.nodeRoot, v.hostPath.path);
        const type = v.hostPath.type ?? '';
        if (type === 'DirectoryOrCreate' || type === '') mkdirSync(path, { recursive: true, mode: 0o755 });
        else if (type === 'FileOrCreate' && !existsSync(path)) writeFile(ctx, path, '', 0o644);
        else if (!existsSync(path))
          throw new MountError(`hostPath type check failed: ${v.hostPath.path} does not exist`);
        dirs.set(v.name, path);
        continue;
      }
      mkdirSync(dir, { recursive: true, mode: v.emptyDir ? 0o777 : 0o755 });
      dirs.set(v.name, dir);
      if (v.emptyDir) continue;
      if (v.secret) {
        const d = dataOf(ctx, 'secrets', v.secret.secretName, Boolean(v.secret.optional));
        if (d) writeKeys(ctx, dir, d, v.secret.items, v.secret.defaultMode ?? 0o644, `secret "${v.secret.secretName}"`);
      } else if (v.configMap) {
        const d = dataOf(ctx, 'configmaps', v.configMap.name, Boolean(v.configMap.optional));
        if (d)
          writeKeys(
            ctx,
            dir,
            d,
            v.configMap.items,
            v.configMap.defaultMode ?? 0o644,
            `configmap "${v.configMap.name}"`,
          );
      } else if (v.projected) await projected(ctx, dir, v.projected, tokens);
      else if (v.downwardAPI)
        for (const it of v.downwardAPI.items ?? [])
          writeFile(
            ctx,
            join(dir, it.path),
            fieldValue(ctx, it.fieldRef?.fieldPath ?? ''),
            it.mode ?? v.downwardAPI.defaultMode ?? 0o644,
          );
      else
        throw new MountError(
          'this volume type is not emulated (Secret, ConfigMap, projected, downwardAPI, emptyDir and hostPath are)',
        );
    } catch (e) {
      throw e instanceof MountError && e.message.startsWith('MountVolume') ? e : fail(e as Error);
    }
  }
  return dirs;
}

/** The mounts of one container: its volumeMounts (subPath included), and the service-account volume. */
export function containerMounts(container: any, dirs: Map<string, string>): Mount[] {
  const out: Mount[] = [];
  for (const m of container.volumeMounts ?? []) {
    const dir = dirs.get(m.name);
    if (!dir) throw new MountError(`volumeMount "${m.name}" names no volume of the pod`);
    const fromHost = m.mountPropagation === 'HostToContainer' || m.mountPropagation === 'Bidirectional';
    out.push({
      source: m.subPath ? join(dir, m.subPath) : dir,
      target: m.mountPath,
      readOnly: Boolean(m.readOnly),
      ...(fromHost || dir === MACHINE_NETNS_DIR ? { recursive: true } : {}),
      ...(fromHost ? { fromHost: true } : {}),
    });
  }
  return out;
}
