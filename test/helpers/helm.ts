import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const CHART = `${ROOT}charts/eni-ipam`;
const TOOLS = `${ROOT}.tools`;

/** A tool from .tools/ (scripts/install-tools.sh puts Helm and promtool there). */
export function tool(name: 'helm' | 'promtool'): string {
  const path = `${TOOLS}/${name}`;
  if (!existsSync(path)) throw new Error(`${path} is missing: run scripts/install-tools.sh (npm test does)`);
  return path;
}

export function run(
  cmd: string,
  args: string[],
  stdin?: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(cmd, args, { timeout: 60_000, maxBuffer: 32 * 1024 * 1024 }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
    if (stdin !== undefined) child.stdin!.end(stdin);
  });
}

export const helm = (args: string[]) => run(tool('helm'), args);

/** The values every install needs, per credential form. */
export const REQUIRED = ['region=cn-hangzhou', 'vpcId=vpc-bp1demo', 'clusterId=prod-1'];
export const CREDENTIAL_FORMS: Record<string, string[]> = {
  secret: ['credentials.mode=secret', 'credentials.secret.name=eni-ipam-access-key'],
  ramRole: ['credentials.mode=ramRole', 'credentials.ramRole.name=KubernetesWorkerRole'],
  rrsa: [
    'credentials.mode=rrsa',
    'credentials.rrsa.roleName=eni-ipam',
    'credentials.rrsa.roleArn=acs:ram::1234567890123456:role/eni-ipam',
    'credentials.rrsa.oidcProviderArn=acs:ram::1234567890123456:oidc-provider/ack-rrsa-c1',
  ],
};
export const setArgs = (values: string[]) => values.flatMap((v) => ['--set', v]);

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [k: string]: unknown;
}

/** `helm template` parsed into objects (CRDs included). */
export async function template(values: string[], extra: string[] = []): Promise<K8sObject[]> {
  const r = await helm([
    'template',
    'eni-ipam',
    CHART,
    '--namespace',
    'kube-system',
    '--include-crds',
    ...setArgs(values),
    ...extra,
  ]);
  if (r.code !== 0) throw new Error(`helm template failed: ${r.stderr}`);
  return YAML.parseAllDocuments(r.stdout)
    .map((d) => d.toJS() as K8sObject | null)
    .filter((o): o is K8sObject => o !== null);
}
