import { DEFAULT_PATH, IMAGE_REPOSITORIES, imageRepository, type ImageConfig } from './container.js';

/** Repositories of the toolbox image (any tag or digest): the machine's own networking tools. */
export const TOOLBOX_REPOSITORIES = ['eni-ipam/toolbox', 'docker.io/eni-ipam/toolbox'];

/**
 * The toolbox: an image reserved for the emulated nodes whose content is the machine's root
 * (`ping`, `ip`, `iperf3`, `curl`, `sleep`, `sh`...). It runs as root, and without a command it
 * sleeps, so that a pod started with `kubectl run NAME --image=eni-ipam/toolbox` stays up for
 * `kubectl exec`.
 */
export const TOOLBOX_IMAGE: ImageConfig = {
  repositories: TOOLBOX_REPOSITORIES,
  workdir: '/',
  entrypoint: [],
  cmd: ['sleep', 'infinity'],
  user: 0,
  group: 0,
  env: { PATH: DEFAULT_PATH },
};

/** What an emulated node runs for an image reference: eni-ipam's image, the toolbox, or nothing. */
export function nodeImage(reference: string, eniIpam: ImageConfig): ImageConfig | undefined {
  const repository = imageRepository(reference);
  if (IMAGE_REPOSITORIES.includes(repository)) return eniIpam;
  if (TOOLBOX_REPOSITORIES.includes(repository)) return TOOLBOX_IMAGE;
  return undefined;
}

/** The images a node runs, for messages about one it does not. */
export const RUNNABLE_IMAGES =
  `eni-ipam's own image (${IMAGE_REPOSITORIES.join(', ')}, any tag) and the toolbox ` +
  `(${TOOLBOX_REPOSITORIES.join(', ')}, any tag)`;
