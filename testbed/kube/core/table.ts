/* eslint-disable @typescript-eslint/no-explicit-any */
import type { KubeObject, PrinterColumn, ResourceType } from './types.js';

/** kubectl's HumanDuration (apimachinery util/duration). */
export function humanDuration(ms: number): string {
  const seconds = Math.floor(ms / 1000);
  if (seconds < -1) return '<invalid>';
  if (seconds < 0) return '0s';
  if (seconds < 120) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 10) return seconds % 60 === 0 ? `${minutes}m` : `${minutes}m${seconds % 60}s`;
  if (minutes < 180) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 8) return minutes % 60 === 0 ? `${hours}h` : `${hours}h${minutes % 60}m`;
  if (hours < 48) return `${hours}h`;
  if (hours < 24 * 8) return hours % 24 === 0 ? `${hours / 24}d` : `${Math.floor(hours / 24)}d${hours % 24}h`;
  if (hours < 24 * 365 * 2) return `${Math.floor(hours / 24)}d`;
  const days = Math.floor(hours / 24);
  if (hours < 24 * 365 * 8) return days % 365 === 0 ? `${days / 365}y` : `${Math.floor(days / 365)}y${days % 365}d`;
  return `${Math.floor(days / 365)}y`;
}

/**
 * The JSONPath of printer columns: `.a.b`, `.a[0].b`, `.a['x.y']`, and a filter
 * `[?(@.type=="Ready")]`, which takes the first matching element; optionally in `{}`.
 */
export function jsonPath(obj: any, path: string): unknown {
  const p = path.trim().replace(/^\{(.*)\}$/, '$1');
  type Step = { key: string | number } | { filter: string; value: string };
  const steps: Step[] = [];
  const re =
    /\.([^.[\]]+)|\[(\d+)\]|\['([^']*)'\]|\["([^"]*)"\]|\[\?\(@\.([\w.-]+)\s*==\s*(?:"([^"]*)"|'([^']*)')\)\]/g;
  let m: RegExpExecArray | null;
  let consumed = 0;
  while ((m = re.exec(p)) !== null) {
    if (m.index !== consumed) return undefined;
    consumed = re.lastIndex;
    if (m[5] !== undefined) steps.push({ filter: m[5], value: (m[6] ?? m[7])! });
    else steps.push({ key: m[1] ?? (m[2] !== undefined ? Number(m[2]) : (m[3] ?? m[4])!) });
  }
  if (consumed !== p.length) return undefined;
  let v = obj;
  for (const step of steps) {
    if (v === null || v === undefined) return undefined;
    if ('filter' in step) {
      if (!Array.isArray(v)) return undefined;
      const field = step.filter.split('.');
      v = v.find((item) => String(field.reduce((x: any, k) => x?.[k], item)) === step.value);
    } else v = v[step.key as any];
  }
  return v;
}

function cell(col: PrinterColumn, v: unknown): unknown {
  if (v === undefined || v === null) return null;
  switch (col.type) {
    case 'date':
      return typeof v === 'string' && !Number.isNaN(Date.parse(v))
        ? humanDuration(Date.now() - Date.parse(v))
        : '<invalid>';
    case 'integer':
      return Number.isInteger(v) ? v : null;
    case 'number':
      return typeof v === 'number' ? v : null;
    case 'boolean':
      return typeof v === 'boolean' ? v : null;
    default:
      return typeof v === 'object' ? JSON.stringify(v) : String(v);
  }
}

/**
 * The STATUS kubectl shows for a pod: Init:N/M, a container's waiting or terminated reason,
 * Terminating, else the phase.
 */
function podStatusText(o: KubeObject): string {
  if (o.metadata.deletionTimestamp) return 'Terminating';
  let reason: string = o.status?.reason ?? o.status?.phase ?? 'Pending';
  const inits: any[] = o.status?.initContainerStatuses ?? [];
  const initTotal = (o.spec?.initContainers ?? []).length;
  const initDone = inits.filter((c) => c.state?.terminated?.exitCode === 0).length;
  const initWaiting = inits.find((c) => c.state?.waiting && c.state.waiting.reason !== 'PodInitializing');
  if (initWaiting) return `Init:${initWaiting.state.waiting.reason}`;
  if (initTotal && initDone < initTotal) return `Init:${initDone}/${initTotal}`;
  for (const c of o.status?.containerStatuses ?? []) {
    if (c.state?.waiting?.reason) reason = c.state.waiting.reason;
    else if (c.state?.terminated?.reason) reason = c.state.terminated.reason;
  }
  return reason;
}

const AGE: PrinterColumn = {
  name: 'Age',
  type: 'date',
  jsonPath: '.metadata.creationTimestamp',
  description: 'CreationTimestamp is a timestamp representing the server time when this object was created.',
};

/** Built-in kinds' usual columns (a subset of the API server's table convertors). */
const BUILTIN_COLUMNS: Record<string, Array<PrinterColumn & { value?: (o: KubeObject) => unknown }>> = {
  nodes: [
    {
      name: 'Status',
      type: 'string',
      jsonPath: '',
      value: (o) =>
        ((o.status?.conditions ?? []).find((c: any) => c.type === 'Ready')?.status === 'True' ? 'Ready' : 'NotReady') +
        (o.spec?.unschedulable ? ',SchedulingDisabled' : ''),
    },
    {
      name: 'Roles',
      type: 'string',
      jsonPath: '',
      value: (o) =>
        Object.keys(o.metadata.labels ?? {})
          .filter((k) => k.startsWith('node-role.kubernetes.io/'))
          .map((k) => k.split('/')[1])
          .join(',') || '<none>',
    },
    AGE,
    { name: 'Version', type: 'string', jsonPath: '.status.nodeInfo.kubeletVersion' },
    {
      name: 'Internal-IP',
      type: 'string',
      jsonPath: '',
      priority: 1,
      value: (o) => (o.status?.addresses ?? []).find((a: any) => a.type === 'InternalIP')?.address ?? '<none>',
    },
  ],
  namespaces: [{ name: 'Status', type: 'string', jsonPath: '.status.phase' }, AGE],
  customresourcedefinitions: [{ name: 'Created At', type: 'string', jsonPath: '.metadata.creationTimestamp' }],
  leases: [{ name: 'Holder', type: 'string', jsonPath: '.spec.holderIdentity' }, AGE],
  deployments: [
    {
      name: 'Ready',
      type: 'string',
      jsonPath: '',
      value: (o) => `${o.status?.readyReplicas ?? 0}/${o.spec?.replicas ?? 1}`,
    },
    { name: 'Up-to-date', type: 'integer', jsonPath: '.status.updatedReplicas' },
    { name: 'Available', type: 'integer', jsonPath: '.status.availableReplicas' },
    AGE,
  ],
  replicasets: [
    { name: 'Desired', type: 'integer', jsonPath: '', value: (o) => o.spec?.replicas ?? 1 },
    { name: 'Current', type: 'integer', jsonPath: '', value: (o) => o.status?.replicas ?? 0 },
    { name: 'Ready', type: 'integer', jsonPath: '', value: (o) => o.status?.readyReplicas ?? 0 },
    AGE,
  ],
  daemonsets: [
    { name: 'Desired', type: 'integer', jsonPath: '', value: (o) => o.status?.desiredNumberScheduled ?? 0 },
    { name: 'Current', type: 'integer', jsonPath: '', value: (o) => o.status?.currentNumberScheduled ?? 0 },
    { name: 'Ready', type: 'integer', jsonPath: '', value: (o) => o.status?.numberReady ?? 0 },
    { name: 'Up-to-date', type: 'integer', jsonPath: '', value: (o) => o.status?.updatedNumberScheduled ?? 0 },
    { name: 'Available', type: 'integer', jsonPath: '', value: (o) => o.status?.numberAvailable ?? 0 },
    {
      name: 'Node Selector',
      type: 'string',
      jsonPath: '',
      value: (o) =>
        Object.entries(o.spec?.template?.spec?.nodeSelector ?? {})
          .map(([k, v]) => `${k}=${String(v)}`)
          .join(',') || '<none>',
    },
    AGE,
  ],
  events: [
    {
      name: 'Last Seen',
      type: 'string',
      jsonPath: '',
      value: (o) =>
        humanDuration(Date.now() - Date.parse(o.lastTimestamp ?? o.eventTime ?? o.metadata.creationTimestamp)),
    },
    { name: 'Type', type: 'string', jsonPath: '.type' },
    { name: 'Reason', type: 'string', jsonPath: '.reason' },
    {
      name: 'Object',
      type: 'string',
      jsonPath: '',
      value: (o) => `${(o.involvedObject?.kind ?? '').toLowerCase()}/${o.involvedObject?.name ?? ''}`,
    },
    { name: 'Message', type: 'string', jsonPath: '.message' },
  ],
  pods: [
    {
      name: 'Ready',
      type: 'string',
      jsonPath: '',
      value: (o) =>
        `${(o.status?.containerStatuses ?? []).filter((c: any) => c.ready).length}/${(o.spec?.containers ?? []).length}`,
    },
    { name: 'Status', type: 'string', jsonPath: '', value: podStatusText },
    {
      name: 'Restarts',
      type: 'integer',
      jsonPath: '',
      value: (o) => (o.status?.containerStatuses ?? []).reduce((n: number, c: any) => n + (c.restartCount ?? 0), 0),
    },
    AGE,
    { name: 'IP', type: 'string', jsonPath: '', priority: 1, value: (o) => o.status?.podIP ?? '<none>' },
    { name: 'Node', type: 'string', jsonPath: '', priority: 1, value: (o) => o.spec?.nodeName ?? '<none>' },
  ],
};

export function columnsFor(
  t: ResourceType,
  version: string,
): Array<PrinterColumn & { value?: (o: KubeObject) => unknown }> {
  if (t.builtin) return BUILTIN_COLUMNS[t.resource] ?? [AGE];
  const custom = t.printerColumns?.[version];
  return custom && custom.length ? custom : [AGE];
}

export function toTable(
  t: ResourceType,
  version: string,
  items: KubeObject[],
  meta: { resourceVersion?: string; continue?: string },
  opts: { includeObject: string; headers: boolean },
) {
  const cols = columnsFor(t, version);
  return {
    kind: 'Table',
    apiVersion: 'meta.k8s.io/v1',
    metadata: meta,
    columnDefinitions: opts.headers
      ? [
          {
            name: 'Name',
            type: 'string',
            format: 'name',
            description: 'Name must be unique within a namespace.',
            priority: 0,
          },
          ...cols.map((c) => ({
            name: c.name,
            type: c.type === 'date' ? 'date' : c.type,
            format: c.format ?? '',
            description: c.description ?? '',
            priority: c.priority ?? 0,
          })),
        ]
      : [],
    rows: items.map((o) => ({
      cells: [o.metadata.name, ...cols.map((c) => (c.value ? c.value(o) : cell(c, jsonPath(o, c.jsonPath))))],
      object:
        opts.includeObject === 'None'
          ? undefined
          : opts.includeObject === 'Object'
            ? o
            : { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: o.metadata },
    })),
  };
}
