import type { KubeRequestInfo, KubeVerb } from '../kube/core/faults.js';

/**
 * A request to the API server as its RequestInfo resolver sees it: the API verb, the resource,
 * subresource, namespace and name, from the method and the path alone. Undefined for a path that
 * is not a resource (discovery, /version, /readyz, OpenAPI).
 */
export function requestInfoOf(method: string, url: string): KubeRequestInfo | undefined {
  const u = new URL(url, 'https://front');
  const parts = u.pathname.split('/').filter(Boolean);
  let group: string;
  let rest: string[];
  if (parts[0] === 'api' && parts.length >= 2) [group, rest] = ['', parts.slice(2)];
  else if (parts[0] === 'apis' && parts.length >= 3) [group, rest] = [parts[1]!, parts.slice(3)];
  else return undefined;
  let watchPath = false;
  if (rest[0] === 'watch') [watchPath, rest] = [true, rest.slice(1)];
  let namespace: string | undefined;
  const namespaceItself = rest[0] === 'namespaces' && rest.length === 3 && ['status', 'finalize'].includes(rest[2]!);
  if (rest[0] === 'namespaces' && rest.length >= 3 && !namespaceItself) [namespace, rest] = [rest[1], rest.slice(2)];
  const [resource, name, subresource] = rest;
  if (!resource) return undefined;
  const watchQuery = ['true', '1'].includes(u.searchParams.get('watch') ?? '');
  const m = method.toUpperCase();
  let verb: KubeVerb;
  if (m === 'GET' || m === 'HEAD') verb = watchPath || watchQuery ? 'watch' : name ? 'get' : 'list';
  else if (m === 'POST') verb = 'create';
  else if (m === 'PUT') verb = 'update';
  else if (m === 'PATCH') verb = 'patch';
  else if (m === 'DELETE') verb = name ? 'delete' : 'deletecollection';
  else return undefined;
  return { verb, resource, group, subresource, namespace, name, path: u.pathname, currentRv: 0 };
}
