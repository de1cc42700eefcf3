import type { ServerResponse } from 'node:http';
import { StatusError } from '../../kube/core/errors.js';
import type { KubeObject } from '../../kube/core/types.js';
import type { Kubelet } from './kubelet.js';

/**
 * `GET pods/NAME/log` as the API server proxies it to the kubelet: `container` (default: the
 * only one, else a 400 naming them), `previous`, `tailLines`, `timestamps`, `follow`.
 */
export async function servePodLog(
  kubelet: Kubelet | undefined,
  pod: KubeObject,
  query: URLSearchParams,
  res: ServerResponse,
): Promise<void> {
  const containers: string[] = [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])].map(
    (c: { name: string }) => c.name,
  );
  const mains: string[] = (pod.spec?.containers ?? []).map((c: { name: string }) => c.name);
  let name = query.get('container') ?? undefined;
  if (!name) {
    if (mains.length !== 1)
      throw new StatusError(
        400,
        'BadRequest',
        `a container name must be specified for pod ${pod.metadata.name}, choose one of: [${mains.join(' ')}]`,
      );
    name = mains[0];
  }
  if (!containers.includes(name!))
    throw new StatusError(400, 'BadRequest', `container ${name} is not valid for pod ${pod.metadata.name}`);
  const previous = query.get('previous') === 'true';
  const buffer = kubelet?.logs(pod, name, previous);
  if (!buffer) {
    throw new StatusError(
      400,
      'BadRequest',
      previous
        ? `previous terminated container "${name}" in pod "${pod.metadata.name}" not found`
        : `container "${name}" in pod "${pod.metadata.name}" is waiting to start: ContainerCreating`,
    );
  }
  const stamps = query.get('timestamps') === 'true';
  const line = (l: { at: string; text: string }) => `${stamps ? `${l.at} ` : ''}${l.text}\n`;
  const tail = query.get('tailLines');
  const lines = tail !== null ? buffer.lines.slice(-Math.max(0, Number(tail))) : buffer.lines;
  res.writeHead(200, { 'content-type': 'text/plain', 'transfer-encoding': 'chunked' });
  for (const l of lines) res.write(line(l));
  if (query.get('follow') !== 'true' || previous) {
    res.end();
    return;
  }
  // Followed until the container exits, as the kubelet streams it.
  const stop = buffer.follow(
    (l) => res.write(line(l)),
    () => res.end(),
  );
  res.on('close', stop);
}
