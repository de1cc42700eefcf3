/** What the demo shows at one moment; plain data, rendered by the functions below. */
export interface DemoView {
  nodes: number;
  ready: number;
  available: number;
  used: number;
  /** Per action: successful calls in total, in the last minute, and the action's quota per minute. */
  actions: Array<{ action: string; total: number; lastMinute: number; quotaPerMinute?: number }>;
  throttled: number;
  allocations: number;
  emptyPoolWaits: number;
  /** Newest last. */
  events: string[];
  elapsedSeconds: number;
  metricsUrl: string;
  kubectl: string;
}

const SHORT: Record<string, string> = {
  CreateNetworkInterface: 'CreateENI',
  AttachNetworkInterface: 'AttachENI',
  AssignPrivateIpAddresses: 'AssignIPs',
  UnassignPrivateIpAddresses: 'UnassignIPs',
};
export const MUTATING_SHOWN = Object.keys(SHORT);

export function bar(done: number, total: number, width: number): string {
  const filled = total ? Math.round((done / total) * width) : 0;
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}]`;
}

/** The one-line form, printed when it changes (stdout is not a terminal). */
export function renderLine(v: DemoView): string {
  const calls = MUTATING_SHOWN.map((a) => `${SHORT[a]} ${v.actions.find((x) => x.action === a)?.total ?? 0}`).join(
    ', ',
  );
  return (
    `nodes ready ${v.ready}/${v.nodes} | IPs available ${v.available} used ${v.used} | ` +
    `${calls} | throttled ${v.throttled}`
  );
}

/** The full-screen form, redrawn in place in a terminal. */
export function renderScreen(v: DemoView, columns = 100): string[] {
  const cut = (s: string) => (s.length > columns ? `${s.slice(0, columns - 1)}…` : s);
  const rows = v.actions
    .filter((a) => a.total > 0 || MUTATING_SHOWN.includes(a.action))
    .map((a) => {
      const quota = a.quotaPerMinute ?? 0;
      const use = quota
        ? `${bar(a.lastMinute, quota, 20)} ${String(a.lastMinute).padStart(5)}/${quota} per min`
        : `${String(a.lastMinute).padStart(5)} per min`;
      return `  ${a.action.padEnd(36)} ${String(a.total).padStart(7)}  ${use}`;
    });
  return [
    `eni-ipam demo — ${Math.floor(v.elapsedSeconds)} s   (Ctrl-C stops it)`,
    '',
    `nodes ready  ${bar(v.ready, v.nodes, 40)} ${v.ready}/${v.nodes}`,
    `pod IPs      available ${v.available}, used ${v.used}; ` +
      `handed out ${v.allocations}, waits on an empty pool ${v.emptyPoolWaits}`,
    `throttled    ${v.throttled}`,
    '',
    `  ${'OpenAPI action'.padEnd(36)} ${'calls'.padStart(7)}  last minute against the quota`,
    ...rows,
    '',
    'last events',
    ...(v.events.length ? v.events.slice(-5).map((e) => `  ${e}`) : ['  (none yet)']),
    '',
    `metrics   ${v.metricsUrl}`,
    `kubectl   ${v.kubectl}`,
  ].map(cut);
}
