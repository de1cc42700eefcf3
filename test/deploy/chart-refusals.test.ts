/* eslint-disable @typescript-eslint/no-explicit-any -- helm's JSON answers are read freely */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startKubeEmulator, type KubeEmulator } from '../../testbed/kube/index.js';
import { CHART, CREDENTIAL_FORMS, REQUIRED, run, setArgs, tool } from '../helpers/helm.js';

// The real `helm install` against an API server, once per wrong value: each must be refused
// before anything is installed (no release, not even a failed one; no workload), with a message
// that names the value. Helm applies the chart's crds/ before it reads the values, so the two
// CRDs may be there: they are not part of the release, and an install keeps them anyway.
let emu: KubeEmulator;
let kubeconfig: string;
const CRDS = ['enipoolclasses.eniipam.io', 'enipools.eniipam.io'];

const helm = (args: string[]) => run(tool('helm'), [...args, '--kubeconfig', kubeconfig, '--namespace', 'kube-system']);
const install = (values: string[], extra: string[] = []) =>
  helm(['install', 'eni-ipam', CHART, ...setArgs([...REQUIRED, ...CREDENTIAL_FORMS.secret!, ...values]), ...extra]);
/** Every object the API server holds, as kind/namespace/name. */
const everything = () =>
  new Set(
    [...emu.store.types.entries()].flatMap(([key, t]) =>
      emu.store.list(t).map((o) => `${key}/${o.metadata.namespace ?? ''}/${o.metadata.name}`),
    ),
  );
const releases = async () => JSON.parse((await helm(['list', '-a', '-o', 'json'])).stdout) as any[];

beforeAll(async () => {
  emu = await startKubeEmulator();
  kubeconfig = join(mkdtempSync(join(tmpdir(), 'chart-refusals-')), 'kubeconfig');
  writeFileSync(kubeconfig, emu.kubeconfig);
});
afterAll(() => emu?.close());

/** [what is wrong, the values (--set), more helm arguments, what the message says]. */
const WRONG: Array<[string, string[], string[], string]> = [
  [
    'a misspelt defaultClass.spec key',
    ['defaultClass.create=true', 'defaultClass.spec.preAlocate=8'],
    [],
    'defaultClass.spec: Additional property preAlocate is not allowed',
  ],
  [
    'a wrong type in defaultClass.spec',
    ['defaultClass.create=true', 'defaultClass.spec.releaseExcessIPs=maybe'],
    [],
    'defaultClass.spec.releaseExcessIPs: Invalid type. Expected: boolean, given: string',
  ],
  [
    'a defaultClass.spec value the CRD does not allow',
    ['defaultClass.create=true', 'defaultClass.spec.vSwitchSelection=Random'],
    [],
    'defaultClass.spec.vSwitchSelection must be one of the following: "MostFreeIPs", "Ordered"',
  ],
  [
    "defaultClass.spec against the CRD's rule (minAllocate above maxAllocate)",
    ['defaultClass.create=true', 'defaultClass.spec.minAllocate=10', 'defaultClass.spec.maxAllocate=5'],
    [],
    'defaultClass.spec.minAllocate (10) is above defaultClass.spec.maxAllocate (5)',
  ],
  [
    'an unknown operator.apiLimits action',
    ['operator.apiLimits.CreateNetworkInterfaces.perMinute=100'],
    [],
    'operator.apiLimits: Additional property CreateNetworkInterfaces is not allowed',
  ],
  [
    'a zero perMinute',
    ['operator.apiLimits.CreateNetworkInterface.perMinute=0'],
    [],
    'operator.apiLimits.CreateNetworkInterface.perMinute: Must be greater than 0',
  ],
  [
    'a zero burst',
    ['operator.apiLimits.CreateNetworkInterface.perMinute=100', 'operator.apiLimits.CreateNetworkInterface.burst=0'],
    [],
    'operator.apiLimits.CreateNetworkInterface.burst: Must be greater than or equal to 1',
  ],
  [
    "the operator's metrics port equal to its health port",
    ['operator.metricsPort=9493'],
    [],
    'operator.metricsPort and operator.healthPort are both 9493',
  ],
  [
    "the agent's metrics port equal to its health port",
    ['agent.metricsPort=8081'],
    [],
    'agent.metricsPort and agent.healthPort are both 8081',
  ],
  [
    "an operator port equal to an agent's (both in the host network)",
    ['operator.healthPort=8081'],
    [],
    'operator.healthPort and agent.healthPort are both 8081: both run in the host network',
  ],
  [
    "the operator's heap above its memory limit",
    ['operator.maxHeapMiB=600'],
    [],
    'operator.maxHeapMiB (600) is not below operator.resources.limits.memory (512Mi = 512 MiB)',
  ],
  [
    "the agent's heap at its memory limit (given in G)",
    ['agent.resources.limits.memory=0.1G'],
    [],
    'agent.maxHeapMiB (128) is not below agent.resources.limits.memory (0.1G = 95 MiB)',
  ],
  [
    'a memory request above the limit',
    ['operator.resources.requests.memory=1Gi'],
    [],
    'operator.resources.requests.memory (1Gi) is above operator.resources.limits.memory (512Mi)',
  ],
  [
    'a memory limit that is no quantity',
    ['agent.resources.limits.memory=lots'],
    [],
    'agent.resources.limits.memory: "lots" is not a memory quantity',
  ],
  [
    'an endpoint without a scheme',
    ['endpoints.ecs=ecs-vpc.cn-hangzhou.aliyuncs.com'],
    [],
    "endpoints.ecs: Does not match pattern '^(https?://",
  ],
  [
    'a surge for the agent',
    ['agent.updateStrategy.rollingUpdate.maxSurge=1'],
    [],
    'agent.updateStrategy.rollingUpdate.maxSurge must be one of the following: 0, "0%"',
  ],
  [
    'lease timings the operator refuses',
    ['operator.leaderElection.renewDeadlineSeconds=20'],
    [],
    'operator.leaderElection: leaseDurationSeconds (15) must be longer than renewDeadlineSeconds (20)',
  ],
  [
    'two replicas without leader election',
    ['operator.leaderElection.enabled=false'],
    [],
    'operator.replicas is 2 with operator.leaderElection.enabled=false',
  ],
  [
    'an env value that is not a string',
    ['operator.extraEnv[0].name=GOMAXPROCS', 'operator.extraEnv[0].value=2'],
    [],
    'operator.extraEnv.0.value: Invalid type. Expected: string, given: integer',
  ],
  [
    'a pod label that is a selector label',
    ['agent.podLabels.app\\.kubernetes\\.io/component=x'],
    [],
    'agent.podLabels: Property name of "app.kubernetes.io/component" does not match',
  ],
];

describe('helm install with a wrong value', () => {
  it.each(WRONG)(
    'refuses %s before installing anything',
    async (_what, values, extra, message) => {
      const before = everything();
      const r = await install(values, extra);
      try {
        expect(r.stderr).toContain(message);
        expect(r.code).not.toBe(0);
        expect(r.stderr).toMatch(/^Error: (INSTALLATION FAILED: )?(values don't meet|execution error)/);
        expect(await releases()).toEqual([]);
        const created = [...everything()].filter((k) => !before.has(k));
        expect(created.filter((k) => !CRDS.some((crd) => k.endsWith(`//${crd}`)))).toEqual([]);
      } finally {
        // A value that got through leaves a release (deployed, or failed halfway): remove it, so
        // that the next case starts clean.
        if ((await releases()).length) await helm(['uninstall', 'eni-ipam']);
      }
    },
    60_000,
  );

  it('installs with good values (the positive control): a deployed release, its workloads and its class', async () => {
    const r = await install(['defaultClass.create=true', 'defaultClass.spec.preAllocate=4']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect((await releases()).map((x) => [x.name, x.status])).toEqual([['eni-ipam', 'deployed']]);
    const all = everything();
    for (const k of [
      'deployments.apps/kube-system/eni-ipam-operator',
      'daemonsets.apps/kube-system/eni-ipam-agent',
      'poddisruptionbudgets.policy/kube-system/eni-ipam-operator',
      'enipoolclasses.eniipam.io//default',
      ...CRDS.map((crd) => `customresourcedefinitions.apiextensions.k8s.io//${crd}`),
    ])
      expect(all).toContain(k);
  }, 60_000);
});
