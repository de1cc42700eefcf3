/* eslint-disable @typescript-eslint/no-explicit-any -- rendered manifests are read freely */
import type { AuditEntry } from '../../testbed/control-plane/index.js';

/**
 * The API server's audit log held against the chart's roles: a request as the permission it
 * used, what a service account's bound roles grant, and whether a grant covers a permission.
 */

/** A request as an RBAC permission: `verb group/resource[/sub] @namespace|cluster [name]`. */
function permission(e: AuditEntry): string {
  const res = e.subresource ? `${e.resource}/${e.subresource}` : e.resource;
  return `${e.verb} ${e.apiGroup}/${res} @${e.namespace ?? 'cluster'} ${e.name ?? ''}`.trim();
}
const describe403 = (e: AuditEntry) => `${e.code} ${permission(e)}`;

interface Grant {
  verb: string;
  resource: string;
  /** undefined: any namespace (a ClusterRole through a ClusterRoleBinding). */
  namespace?: string;
  names?: string[];
  text: string;
}

/** Each verb × group × resource a service account's bound roles grant. */
function grants(objs: any[], account: string): Grant[] {
  const out: Grant[] = [];
  for (const b of objs.filter((o) => o.kind === 'ClusterRoleBinding' || o.kind === 'RoleBinding')) {
    if (!b.subjects.some((s: any) => s.kind === 'ServiceAccount' && s.name === account)) continue;
    const role = objs.find((o) => o.kind === b.roleRef.kind && o.metadata.name === b.roleRef.name);
    const namespace = b.kind === 'RoleBinding' ? b.metadata.namespace : undefined;
    for (const rule of role.rules)
      for (const group of rule.apiGroups)
        for (const resource of rule.resources)
          for (const verb of rule.verbs)
            out.push({
              verb,
              resource: `${group}/${resource}`,
              namespace,
              names: rule.resourceNames,
              text: `${verb} ${group}/${resource} @${namespace ?? 'cluster'}${rule.resourceNames ? ` ${rule.resourceNames}` : ''}`,
            });
  }
  return out;
}

function covers(g: Grant, p: string): boolean {
  const [verb, resource, where, name] = p.split(' ') as [string, string, string, string | undefined];
  if (g.verb !== verb || g.resource !== resource) return false;
  if (g.namespace !== undefined && where !== `@${g.namespace}`) return false;
  // A request with no name (create, list, watch) is not covered by a rule limited to names.
  return !g.names || (name !== undefined && g.names.includes(name));
}

/**
 * A run's requests by one service account against its roles in the rendered chart: those
 * refused (401, 403) before `until`, those no role grants, and grants no request used.
 */
export function roleAudit(
  entries: AuditEntry[],
  objs: any[],
  account: string,
  until = Infinity,
): { refused: string[]; ungranted: string[]; unused: string[] } {
  const used = new Set(entries.map(permission));
  const granted = grants(objs, account);
  return {
    refused: entries.filter((e) => (e.code === 401 || e.code === 403) && e.time < until).map(describe403),
    ungranted: [...used].filter((p) => !granted.some((g) => covers(g, p))).sort(),
    unused: granted
      .filter((g) => ![...used].some((p) => covers(g, p)))
      .map((g) => g.text)
      .sort(),
  };
}
