import type { KubeObject } from '../../kube/core/types.js';
import { controllerOf, ownerRef, setCondition, type Objects } from '../objects.js';
import { deploymentLimits, sameTemplate, templateHash } from './rollout-math.js';

const REVISION = 'deployment.kubernetes.io/revision';
const revisionOf = (rs: KubeObject): number => Number(rs.metadata.annotations?.[REVISION] ?? 0);

function setReplicas(
  objects: Objects,
  rs: KubeObject,
  replicas: number,
  d: KubeObject,
  extra: Record<string, string> = {},
): KubeObject {
  const want = d.spec?.replicas ?? 1;
  const annotations = {
    ...rs.metadata.annotations,
    'deployment.kubernetes.io/desired-replicas': String(want),
    'deployment.kubernetes.io/max-replicas': String(want + deploymentLimits(d).surge),
    ...extra,
  };
  if (rs.spec.replicas === replicas && JSON.stringify(annotations) === JSON.stringify(rs.metadata.annotations))
    return rs;
  return (
    objects.update('replicasets.apps', {
      ...rs,
      metadata: { ...rs.metadata, annotations },
      spec: { ...rs.spec, replicas },
    }) ?? rs
  );
}

/**
 * Rolls each Deployment through ReplicaSets: the ReplicaSet of the current template (created
 * with the next revision, or an old one taken back on a rollback) is scaled up within maxSurge
 * while older ones are scaled down within maxUnavailable (Recreate: old ones to zero first).
 * Status as kubectl rollout status and helm --wait read it.
 */
export function reconcileDeployments(objects: Objects): void {
  for (const d of objects.list('deployments.apps')) {
    if (d.metadata.deletionTimestamp) continue;
    const ns = d.metadata.namespace;
    const owned = objects
      .list('replicasets.apps', ns)
      .filter((rs) => controllerOf(rs)?.uid === d.metadata.uid && !rs.metadata.deletionTimestamp);
    const want = d.spec?.replicas ?? 1;
    const maxRevision = Math.max(0, ...owned.map(revisionOf));
    let current = owned.find((rs) => sameTemplate(rs.spec?.template, d.spec?.template));
    const old = owned.filter((rs) => rs !== current);
    const paused = Boolean(d.spec?.paused);
    if (!paused) {
      if (!current) {
        const hash = templateHash(d.spec?.template);
        const template = structuredClone(d.spec?.template ?? {});
        template.metadata = {
          ...template.metadata,
          labels: { ...template.metadata?.labels, 'pod-template-hash': hash },
        };
        const selector = structuredClone(d.spec?.selector ?? {});
        selector.matchLabels = { ...selector.matchLabels, 'pod-template-hash': hash };
        const recreate = d.spec?.strategy?.type === 'Recreate';
        const start = recreate
          ? 0
          : old.length
            ? Math.min(
                want,
                Math.max(0, want + deploymentLimits(d).surge - old.reduce((n, rs) => n + (rs.spec?.replicas ?? 0), 0)),
              )
            : want;
        current = objects.create('replicasets.apps', {
          apiVersion: 'apps/v1',
          kind: 'ReplicaSet',
          metadata: {
            name: `${d.metadata.name}-${hash}`,
            namespace: ns,
            labels: { ...template.metadata.labels },
            annotations: {
              [REVISION]: String(maxRevision + 1),
              'deployment.kubernetes.io/desired-replicas': String(want),
              'deployment.kubernetes.io/max-replicas': String(want + deploymentLimits(d).surge),
            },
            ownerReferences: [ownerRef(d)],
          },
          spec: { replicas: start, minReadySeconds: d.spec?.minReadySeconds, selector, template },
        });
      } else if (revisionOf(current) < maxRevision) {
        // A rollback (or a template back to an older one): that ReplicaSet becomes the newest revision.
        current = setReplicas(objects, current, current.spec.replicas ?? 0, d, { [REVISION]: String(maxRevision + 1) });
      }
      roll(objects, d, current, old);
      // The Deployment carries the revision of its current ReplicaSet, as kubectl rollout history shows it.
      const revision = String(revisionOf(current));
      if (d.metadata.annotations?.[REVISION] !== revision) {
        objects.update('deployments.apps', {
          ...d,
          metadata: { ...d.metadata, annotations: { ...d.metadata.annotations, [REVISION]: revision } },
        });
      }
    }
    writeStatus(
      objects,
      d,
      current,
      owned.filter((rs) => rs.metadata.uid !== current?.metadata.uid),
    );
    pruneHistory(objects, d);
  }
}

function roll(objects: Objects, d: KubeObject, current: KubeObject, old: KubeObject[]): void {
  const want = d.spec?.replicas ?? 1;
  const fresh = (rs: KubeObject) => objects.get('replicasets.apps', rs.metadata.namespace, rs.metadata.name!) ?? rs;
  const specOf = (rs: KubeObject) => fresh(rs).spec?.replicas ?? 0;
  const avail = (rs: KubeObject) => fresh(rs).status?.availableReplicas ?? 0;
  const oldActive = old.filter((rs) => specOf(rs) > 0 || (fresh(rs).status?.replicas ?? 0) > 0);
  if (d.spec?.strategy?.type === 'Recreate') {
    for (const rs of old) if (specOf(rs) > 0) setReplicas(objects, fresh(rs), 0, d);
    if (oldActive.some((rs) => (fresh(rs).status?.replicas ?? 0) > 0)) return;
    setReplicas(objects, fresh(current), want, d);
    return;
  }
  const { surge, unavailable } = deploymentLimits(d);
  // Scale up the current ReplicaSet within maxSurge.
  const total = specOf(current) + old.reduce((n, rs) => n + specOf(rs), 0);
  if (specOf(current) < want) {
    const room = want + surge - total;
    if (room > 0) setReplicas(objects, fresh(current), Math.min(want, specOf(current) + room), d);
  } else if (specOf(current) > want) setReplicas(objects, fresh(current), want, d);
  else setReplicas(objects, fresh(current), want, d);
  // Scale down old ReplicaSets within maxUnavailable: their pods that are not available go first.
  const minAvailable = want - unavailable;
  let canRemove = avail(current) + old.reduce((n, rs) => n + avail(rs), 0) - minAvailable;
  for (const rs of [...old].sort((a, b) => revisionOf(a) - revisionOf(b))) {
    const spec = specOf(rs);
    if (spec === 0) continue;
    const unhealthy = Math.max(0, spec - avail(rs));
    let next = spec - unhealthy;
    if (canRemove > 0) {
      const cut = Math.min(canRemove, next);
      next -= cut;
      canRemove -= cut;
    }
    if (next !== spec) setReplicas(objects, fresh(rs), next, d);
  }
}

function writeStatus(objects: Objects, d: KubeObject, current: KubeObject | undefined, old: KubeObject[]): void {
  const fresh = (rs: KubeObject) => objects.get('replicasets.apps', rs.metadata.namespace, rs.metadata.name!) ?? rs;
  const all = [...(current ? [fresh(current)] : []), ...old.map(fresh)];
  const sum = (f: (rs: KubeObject) => number | undefined) => all.reduce((n, rs) => n + (f(rs) ?? 0), 0);
  const want = d.spec?.replicas ?? 1;
  const replicas = sum((rs) => rs.status?.replicas);
  const updated = current ? (fresh(current).status?.replicas ?? 0) : 0;
  const available = sum((rs) => rs.status?.availableReplicas);
  const minAvailable = want - deploymentLimits(d).unavailable;
  const cur = current ? fresh(current) : undefined;
  const complete =
    updated === want &&
    replicas === want &&
    available >= want &&
    (cur?.status?.observedGeneration ?? 0) >= (cur?.metadata.generation ?? 0);
  let conditions = setCondition(
    d.status?.conditions,
    available >= minAvailable
      ? {
          type: 'Available',
          status: 'True',
          reason: 'MinimumReplicasAvailable',
          message: 'Deployment has minimum availability.',
        }
      : {
          type: 'Available',
          status: 'False',
          reason: 'MinimumReplicasUnavailable',
          message: 'Deployment does not have minimum availability.',
        },
    { lastUpdateTime: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z') },
  );
  const rsName = current?.metadata.name ?? '';
  conditions = setCondition(
    conditions,
    d.spec?.paused
      ? { type: 'Progressing', status: 'Unknown', reason: 'DeploymentPaused', message: 'Deployment is paused' }
      : complete
        ? {
            type: 'Progressing',
            status: 'True',
            reason: 'NewReplicaSetAvailable',
            message: `ReplicaSet "${rsName}" has successfully progressed.`,
          }
        : {
            type: 'Progressing',
            status: 'True',
            reason: 'ReplicaSetUpdated',
            message: `ReplicaSet "${rsName}" is progressing.`,
          },
    { lastUpdateTime: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z') },
  );
  objects.updateStatus('deployments.apps', d.metadata.namespace, d.metadata.name!, {
    observedGeneration: d.metadata.generation,
    replicas,
    updatedReplicas: updated,
    readyReplicas: sum((rs) => rs.status?.readyReplicas),
    availableReplicas: available,
    unavailableReplicas: Math.max(0, want - available),
    conditions,
  });
}

/** Keeps revisionHistoryLimit (default 10) old ReplicaSets scaled to zero, deleting older ones. */
function pruneHistory(objects: Objects, d: KubeObject): void {
  const limit = d.spec?.revisionHistoryLimit ?? 10;
  const owned = objects
    .list('replicasets.apps', d.metadata.namespace)
    .filter((rs) => controllerOf(rs)?.uid === d.metadata.uid && !rs.metadata.deletionTimestamp);
  const maxRevision = Math.max(0, ...owned.map(revisionOf));
  const idle = owned
    .filter((rs) => revisionOf(rs) < maxRevision && (rs.spec?.replicas ?? 0) === 0 && (rs.status?.replicas ?? 0) === 0)
    .sort((a, b) => revisionOf(a) - revisionOf(b));
  for (const rs of idle.slice(0, Math.max(0, idle.length - limit)))
    objects.delete('replicasets.apps', rs.metadata.namespace, rs.metadata.name!);
}
