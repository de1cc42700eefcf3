/* eslint-disable @typescript-eslint/no-explicit-any -- manifests are read as plain JSON */
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import YAML from 'yaml';
import { DEFAULT_API_LIMITS } from '../../src/cloud/limits.js';
import { renderValuesSchema } from '../../src/api/values-schema.js';
import { kube, kubectlFor } from '../helpers/kube.js';
import { CHART, CREDENTIAL_FORMS, REQUIRED, ROOT, helm, setArgs, template, type K8sObject } from '../helpers/helm.js';

const find = (objs: K8sObject[], kind: string, suffix = '') =>
  objs.find((o) => o.kind === kind && o.metadata.name.endsWith(suffix)) as any;
const containers = (workload: any): any[] => [
  ...(workload.spec.template.spec.initContainers ?? []),
  ...workload.spec.template.spec.containers,
];

describe('the Helm chart', () => {
  it('ships the CRDs of crds/ unchanged', () => {
    const mine = readdirSync(`${ROOT}crds`).sort();
    expect(readdirSync(`${CHART}/crds`).sort()).toEqual(mine);
    for (const f of mine)
      expect(readFileSync(`${CHART}/crds/${f}`, 'utf8')).toBe(readFileSync(`${ROOT}crds/${f}`, 'utf8'));
  });

  it('has the generated parts of values.schema.json from src/api and src/cloud (run `npm run gen:crds` after changing them)', () => {
    const file = readFileSync(`${CHART}/values.schema.json`, 'utf8');
    expect(renderValuesSchema(file, Object.keys(DEFAULT_API_LIMITS))).toBe(file);
  });

  it.each(Object.keys(CREDENTIAL_FORMS))('passes helm lint --strict with the %s credentials', async (form) => {
    const r = await helm(['lint', '--strict', CHART, ...setArgs([...REQUIRED, ...CREDENTIAL_FORMS[form]!])]);
    expect(r.stderr + r.stdout).toContain('1 chart(s) linted, 0 chart(s) failed');
    expect(r.code).toBe(0);
  });

  it('passes helm lint --strict with every optional part on', async () => {
    const all = [
      'monitoring.serviceMonitor.enabled=true',
      'monitoring.prometheusRule.enabled=true',
      'monitoring.grafanaDashboard.enabled=true',
      'defaultClass.create=true',
      'operator.apiLimits.CreateNetworkInterface.perMinute=250',
      'operator.extraArgs={--node-gone-grace=300}',
      'agent.extraArgs={--cooldown=60}',
      'operator.podLabels.team=net',
      'agent.podLabels.team=net',
    ];
    const r = await helm(['lint', '--strict', CHART, ...setArgs([...REQUIRED, ...CREDENTIAL_FORMS.secret!, ...all])]);
    expect(r.code).toBe(0);
  });

  it('says which value is missing, and rejects wrong types and unknown keys through values.schema.json', async () => {
    const bare = await helm(['template', 'x', CHART]);
    expect(bare.code).not.toBe(0);
    expect(bare.stderr).toContain(
      'region is required: the Alibaba Cloud region of the cluster, e.g. --set region=cn-hangzhou',
    );
    const noSecret = await helm(['template', 'x', CHART, ...setArgs(REQUIRED)]);
    expect(noSecret.stderr).toContain('credentials.secret.name is required with credentials.mode=secret');
    const wrongType = await helm([
      'template',
      'x',
      CHART,
      ...setArgs([...REQUIRED, ...CREDENTIAL_FORMS.secret!, 'operator.replicas=two']),
    ]);
    expect(wrongType.stderr).toContain('operator.replicas: Invalid type. Expected: integer, given: string');
    const unknown = await helm([
      'template',
      'x',
      CHART,
      ...setArgs([...REQUIRED, ...CREDENTIAL_FORMS.secret!, 'operator.replica=3']),
    ]);
    expect(unknown.stderr).toContain('operator: Additional property replica is not allowed');
    const badMode = await helm(['template', 'x', CHART, ...setArgs([...REQUIRED, 'credentials.mode=password'])]);
    expect(badMode.stderr).toMatch(
      /credentials\.mode: credentials\.mode must be one of the following: "secret", "ramRole", "rrsa"/,
    );
  });

  it('grants least privilege: exactly what the operator and the agent use, no wildcard anywhere', async () => {
    const objs = await template([...REQUIRED, ...CREDENTIAL_FORMS.secret!]);
    const roles = objs.filter((o) => o.kind === 'ClusterRole' || o.kind === 'Role') as any[];
    for (const r of roles)
      for (const rule of r.rules)
        for (const k of ['verbs', 'resources', 'apiGroups']) expect(rule[k]).not.toContain('*');
    const rules = (kind: string, name: string) =>
      find(objs, kind, name).rules.map((r: any) => ({
        groups: r.apiGroups,
        resources: r.resources,
        verbs: r.verbs,
        names: r.resourceNames,
      }));
    expect(rules('ClusterRole', '-operator')).toEqual([
      // patch: the startup taint goes once the node's pool is Ready.
      { groups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch', 'patch'], names: undefined },
      { groups: [''], resources: ['pods'], verbs: ['list', 'watch'], names: undefined },
      {
        groups: ['eniipam.io'],
        resources: ['enipools'],
        verbs: ['get', 'list', 'watch', 'create', 'patch', 'delete'],
        names: undefined,
      },
      { groups: ['eniipam.io'], resources: ['enipoolclasses'], verbs: ['list', 'watch'], names: undefined },
      { groups: ['eniipam.io'], resources: ['enipools/status'], verbs: ['get', 'patch'], names: undefined },
      { groups: ['eniipam.io'], resources: ['enipoolclasses/status'], verbs: ['patch'], names: undefined },
    ]);
    const opRole = find(objs, 'Role', '-operator');
    expect(opRole.metadata.namespace).toBe('kube-system');
    expect(rules('Role', '-operator')).toEqual([
      { groups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'], names: undefined },
      {
        groups: ['coordination.k8s.io'],
        resources: ['leases'],
        verbs: ['get', 'update'],
        names: ['eni-ipam-operator'],
      },
    ]);
    // Its Events are all about cluster-scoped objects: the API server keeps those in `default` only.
    expect(find(objs, 'Role', '-operator-events').metadata.namespace).toBe('default');
    expect(rules('Role', '-operator-events')).toEqual([
      { groups: [''], resources: ['events'], verbs: ['create', 'patch'], names: undefined },
    ]);
    expect(rules('ClusterRole', '-agent')).toEqual([
      { groups: ['eniipam.io'], resources: ['enipools'], verbs: ['list', 'watch'], names: undefined },
      { groups: ['eniipam.io'], resources: ['enipools/status'], verbs: ['patch'], names: undefined },
      { groups: [''], resources: ['pods'], verbs: ['list'], names: undefined },
      // eniMode Exclusive: its node's eniipam.io/eni.
      { groups: [''], resources: ['nodes/status'], verbs: ['patch'], names: undefined },
      // On the pods that wait for an address, in their namespaces: any namespace.
      { groups: [''], resources: ['events'], verbs: ['create', 'patch'], names: undefined },
    ]);
    expect(objs.some((o: any) => o.kind === 'Role' && o.metadata.name.endsWith('-agent'))).toBe(false);
    for (const b of objs.filter((o) => o.kind.endsWith('Binding')) as any[]) {
      const account = b.roleRef.name.replace(/-events$/, '');
      expect(b.subjects).toEqual([{ kind: 'ServiceAccount', name: account, namespace: 'kube-system' }]);
    }
    // The Lease the Role names is the one the operator is told to use.
    expect(find(objs, 'Deployment').spec.template.spec.containers[0].args).toContain(
      '--leader-elect-lease-name=eni-ipam-operator',
    );
    // It is a release object, so that helm uninstall removes it.
    expect(find(objs, 'Lease', '-operator').metadata).toMatchObject({
      name: 'eni-ipam-operator',
      namespace: 'kube-system',
    });
  });

  it('runs two operator replicas with leader election, probes, limits, topology spread and a locked-down container, in the host network', async () => {
    const objs = await template([...REQUIRED, ...CREDENTIAL_FORMS.secret!]);
    const d = find(objs, 'Deployment', '-operator');
    expect(d.spec.replicas).toBe(2);
    const pod = d.spec.template.spec;
    expect(pod.serviceAccountName).toBe('eni-ipam-operator');
    expect(pod.topologySpreadConstraints.map((t: any) => t.topologyKey)).toEqual([
      'kubernetes.io/hostname',
      'topology.kubernetes.io/zone',
    ]);
    // It boots a cluster whose CNI is eni-ipam: no pod address needed, cluster DNS not needed,
    // started on nodes not Ready yet (no CNI), not initialized yet, control-plane or critical-addons-only.
    expect(pod.hostNetwork).toBe(true);
    expect(pod.dnsPolicy).toBe('Default');
    expect(pod.priorityClassName).toBe('system-cluster-critical');
    expect(pod.tolerations.map((t: any) => `${t.key}:${t.operator}:${t.effect ?? ''}`)).toEqual([
      'node.kubernetes.io/not-ready:Exists:',
      'node.kubernetes.io/network-unavailable:Exists:',
      'node.cloudprovider.kubernetes.io/uninitialized:Exists:',
      'node-role.kubernetes.io/control-plane:Exists:',
      'node-role.kubernetes.io/master:Exists:',
      'CriticalAddonsOnly:Exists:',
      // The startup taint of the nodes whose pools it has yet to fill.
      'eniipam.io/pool-not-ready:Exists:NoSchedule',
    ]);
    // A drained (unschedulable) or lost (unreachable) node does not keep it.
    expect(pod.tolerations.some((t: any) => !t.key)).toBe(false);
    // A replacement can start only once the old replica freed the node's ports.
    expect(d.spec.strategy).toEqual({ type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 1 } });
    const c = pod.containers[0];
    expect(c.args).toEqual(
      expect.arrayContaining([
        'operator',
        '--region=cn-hangzhou',
        '--vpc-id=vpc-bp1demo',
        '--cluster-id=prod-1',
        '--leader-elect',
        '--leader-elect-namespace=kube-system',
        '--credentials-dir=/etc/eni-ipam/credentials',
        '--mode=normal',
      ]),
    );
    expect(c.args.some((a: string) => a.startsWith('--ecs-endpoint'))).toBe(false); // the VPC-internal default
    expect(c.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'health' });
    expect(c.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'health' });
    // The node's ports: off Prometheus's 9090, 8080, Cilium's and the agent's.
    expect(c.ports.map((p: any) => [p.name, p.containerPort, p.hostPort])).toEqual([
      ['metrics', 9492, 9492],
      ['health', 9493, 9493],
    ]);
    expect(c.args).toEqual(expect.arrayContaining(['--metrics-addr=0.0.0.0:9492', '--health-addr=0.0.0.0:9493']));
    // The leader-election identity names the pod (its hostname is the node's).
    expect(c.env.find((e: any) => e.name === 'POD_NAME').valueFrom.fieldRef.fieldPath).toBe('metadata.name');
    expect(c.resources.requests).toEqual({ cpu: '100m', memory: '128Mi' });
    expect(c.resources.limits.memory).toBe('512Mi');
    // The heap limit stays below the container's, so V8 collects before the kernel kills.
    expect(c.env.find((e: any) => e.name === 'NODE_OPTIONS').value).toBe(
      '--max-old-space-size=384 --max-semi-space-size=4',
    );
    expect(c.securityContext).toMatchObject({
      runAsNonRoot: true,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
    expect(c.securityContext.runAsUser).toBeGreaterThan(0);
    expect(pod.securityContext).toEqual({ runAsNonRoot: true, runAsUser: 65532, fsGroup: 65532 });
    // Two replicas: a drain never evicts both.
    expect(find(objs, 'PodDisruptionBudget', '-operator').spec).toEqual({
      maxUnavailable: 1,
      selector: { matchLabels: d.spec.selector.matchLabels },
    });

    const single = find(
      await template([
        ...REQUIRED,
        ...CREDENTIAL_FORMS.secret!,
        'operator.leaderElection.enabled=false',
        'operator.replicas=1',
      ]),
      'Deployment',
    );
    expect(single.spec.template.spec.containers[0].args).toContain('--no-leader-elect');
    // One replica: no PodDisruptionBudget, which could only block drains.
    expect(
      find(await template([...REQUIRED, ...CREDENTIAL_FORMS.secret!, 'operator.replicas=1']), 'PodDisruptionBudget'),
    ).toBeUndefined();
  });

  it('runs the agent on every node in the host network, with its host folders and an init container that installs the plugin', async () => {
    const objs = await template([...REQUIRED, ...CREDENTIAL_FORMS.secret!]);
    const ds = find(objs, 'DaemonSet', '-agent');
    const pod = ds.spec.template.spec;
    expect(pod.hostNetwork).toBe(true);
    expect(pod.dnsPolicy).toBe('Default');
    expect(pod.priorityClassName).toBe('system-node-critical');
    expect(pod.tolerations).toEqual([{ operator: 'Exists' }]);
    // 10% of nodes at a time, never two agents on a node (they would share its state and socket).
    expect(ds.spec.updateStrategy).toEqual({ type: 'RollingUpdate', rollingUpdate: { maxUnavailable: '10%' } });
    const hostPaths = Object.fromEntries(
      pod.volumes.filter((v: any) => v.hostPath).map((v: any) => [v.name, v.hostPath.path]),
    );
    expect(hostPaths).toEqual({
      state: '/var/lib/eni-ipam',
      socket: '/run/eni-ipam',
      'cni-bin': '/opt/cni/bin',
      'cni-conf': '/etc/cni/net.d',
    });
    const [init, agent] = containers(ds);
    expect(init.args).toEqual([
      'install-cni',
      '--bin-dir=/host/cni/bin',
      '--conf-dir=/host/cni/net.d',
      '--conflist=/etc/eni-ipam/cni/10-eni-ipam.conflist',
    ]);
    expect(agent.args).toEqual(
      expect.arrayContaining(['agent', '--state-dir=/var/lib/eni-ipam', '--socket=/run/eni-ipam/agent.sock']),
    );
    expect(agent.env.find((e: any) => e.name === 'NODE_NAME').valueFrom.fieldRef.fieldPath).toBe('spec.nodeName');
    expect(agent.ports.map((p: any) => [p.name, p.containerPort, p.hostPort])).toEqual([
      ['metrics', 9091, 9091],
      ['health', 8081, 8081],
    ]);
    expect(agent.env.find((e: any) => e.name === 'POD_NAME').valueFrom.fieldRef.fieldPath).toBe('metadata.name');
    for (const c of [init, agent])
      expect(c.securityContext).toMatchObject({
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        capabilities: { drop: ['ALL'] },
      });
    // The node's datapath (links, routes, rules) needs NET_ADMIN: the agent has it, its init container not.
    expect(agent.securityContext.capabilities.add).toEqual(['NET_ADMIN']);
    expect(init.securityContext.capabilities.add).toBeUndefined();
    expect(agent.args).toEqual(expect.arrayContaining(['--mtu=1500', '--route-table-base=3000', '--device-timeout=5']));
    expect(agent.args).not.toContain('--node-routing=false');
    const unrouted = containers(
      find(
        await template([...REQUIRED, ...CREDENTIAL_FORMS.secret!, 'agent.nodeRouting=false']),
        'DaemonSet',
        '-agent',
      ),
    )[1];
    expect(unrouted.args).toContain('--node-routing=false');
    expect(unrouted.securityContext.capabilities).toEqual({ drop: ['ALL'] });
    // The conflists it installs are the examples the datapath tests use, with the socket the agent serves.
    const conflists = find(objs, 'ConfigMap', '-cni').data;
    for (const name of ['10-eni-ipam.conflist', '10-eni-ipam-exclusive.conflist'])
      expect(JSON.parse(conflists[name])).toEqual(JSON.parse(readFileSync(`${ROOT}examples/${name}`, 'utf8')));
    // The agent keeps the host's conflist to its pool's eniMode: both files mounted, the host folder writable.
    expect(agent.args).toEqual(
      expect.arrayContaining([
        '--cni-conf-dir=/host/cni/net.d',
        '--shared-conflist=/etc/eni-ipam/cni/10-eni-ipam.conflist',
        '--exclusive-conflist=/etc/eni-ipam/cni/10-eni-ipam-exclusive.conflist',
      ]),
    );
    expect(agent.volumeMounts).toEqual(
      expect.arrayContaining([
        { name: 'cni-conf', mountPath: '/host/cni/net.d' },
        { name: 'cni-config', mountPath: '/etc/eni-ipam/cni', readOnly: true },
      ]),
    );
    // Without exclusiveENIs: no SYS_ADMIN, no pod namespaces.
    expect(agent.volumeMounts.map((m: any) => m.name)).not.toContain('netns');
  });

  it('agent.exclusiveENIs: SYS_ADMIN for the agent (setns), the host’s /var/run/netns HostToContainer; refused without node routing or with an Exclusive default class but no agents able to serve it', async () => {
    const ds = find(
      await template([...REQUIRED, ...CREDENTIAL_FORMS.secret!, 'agent.exclusiveENIs=true']),
      'DaemonSet',
      '-agent',
    );
    const [init, agent] = containers(ds);
    expect(agent.securityContext.capabilities).toEqual({ drop: ['ALL'], add: ['NET_ADMIN', 'SYS_ADMIN'] });
    expect(init.securityContext.capabilities.add).toBeUndefined();
    expect(agent.volumeMounts).toContainEqual({
      name: 'netns',
      mountPath: '/var/run/netns',
      mountPropagation: 'HostToContainer',
    });
    expect(ds.spec.template.spec.volumes).toContainEqual({
      name: 'netns',
      hostPath: { path: '/var/run/netns', type: 'DirectoryOrCreate' },
    });
    const refused = async (values: string[], message: string) => {
      const r = await helm(['template', 'x', CHART, ...setArgs([...REQUIRED, ...CREDENTIAL_FORMS.secret!, ...values])]);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain(message);
    };
    await refused(
      ['agent.exclusiveENIs=true', 'agent.nodeRouting=false'],
      'agent.exclusiveENIs=true needs agent.nodeRouting=true',
    );
    await refused(
      ['defaultClass.create=true', 'defaultClass.spec.eniMode=Exclusive'],
      'defaultClass.spec.eniMode is Exclusive but agent.exclusiveENIs is false',
    );
    // With the agents able to, an Exclusive default class renders.
    const ok = await template([
      ...REQUIRED,
      ...CREDENTIAL_FORMS.secret!,
      'agent.exclusiveENIs=true',
      'defaultClass.create=true',
      'defaultClass.spec.eniMode=Exclusive',
      'defaultClass.spec.preAllocate=1',
    ]);
    expect(find(ok, 'ENIPoolClass', 'default').spec.eniMode).toBe('Exclusive');
  });

  it('renders what a cluster admin sets: extra args and env, pod labels and annotations, security contexts, strategies, the disruption budget, the pod network', async () => {
    const objs = await template(
      [
        ...REQUIRED,
        ...CREDENTIAL_FORMS.secret!,
        'operator.extraArgs={--node-gone-grace=300}',
        'operator.extraEnv[0].name=NO_PROXY',
        'operator.extraEnv[0].value=100.100.100.200',
        'operator.podLabels.team=net',
        'operator.podAnnotations.owner=platform',
        'operator.podSecurityContext.runAsUser=1000',
        'operator.securityContext.runAsUser=1000',
        'operator.podDisruptionBudget.maxUnavailable=50%',
        'operator.updateStrategy.type=Recreate',
        'operator.hostNetwork=false',
        'agent.extraArgs={--cooldown=60,--status-interval=2}',
        'agent.extraEnv[0].name=GOMAXPROCS',
        'agent.podLabels.team=net',
        'agent.podAnnotations.owner=platform',
        'agent.podSecurityContext.fsGroup=0',
        'agent.securityContext.readOnlyRootFilesystem=false',
        'agent.updateStrategy.rollingUpdate.maxUnavailable=2',
      ],
      // An env value or an annotation is a string: a number is refused by the schema, not by the API server halfway.
      ['--set-string', 'agent.extraEnv[0].value=1', '--set-string', 'agent.podAnnotations.note=1'],
    );
    const d = find(objs, 'Deployment', '-operator');
    const ds = find(objs, 'DaemonSet', '-agent');
    const [op] = containers(d);
    const [init, agent] = containers(ds);
    // Appended last, so that a flag given here wins over the chart's.
    expect(op.args.at(-1)).toBe('--node-gone-grace=300');
    expect(agent.args.slice(-2)).toEqual(['--cooldown=60', '--status-interval=2']);
    expect(op.env.at(-1)).toEqual({ name: 'NO_PROXY', value: '100.100.100.200' });
    expect(agent.env.at(-1)).toEqual({ name: 'GOMAXPROCS', value: '1' });
    for (const w of [d, ds]) {
      expect(w.spec.template.metadata.labels.team).toBe('net');
      expect(w.spec.template.metadata.annotations.owner).toBe('platform');
      // The selector stays the chart's.
      expect(w.spec.selector.matchLabels.team).toBeUndefined();
    }
    expect(ds.spec.template.metadata.annotations.note).toBe('1');
    // Security contexts: the admin's keys over the chart's defaults.
    expect(d.spec.template.spec.securityContext).toEqual({ runAsNonRoot: true, runAsUser: 1000, fsGroup: 65532 });
    expect(op.securityContext).toMatchObject({
      runAsUser: 1000,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
    expect(ds.spec.template.spec.securityContext).toEqual({ fsGroup: 0 });
    for (const c of [init, agent])
      expect(c.securityContext).toMatchObject({
        runAsUser: 0,
        readOnlyRootFilesystem: false,
        capabilities: { drop: ['ALL'] },
      });
    // Strategies: Recreate carries no rollingUpdate (the API server would refuse one).
    expect(d.spec.strategy).toEqual({ type: 'Recreate' });
    expect(ds.spec.updateStrategy).toEqual({ type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 2 } });
    expect(find(objs, 'PodDisruptionBudget', '-operator').spec.maxUnavailable).toBe('50%');
    // In the pod network: no host ports, cluster DNS.
    expect(d.spec.template.spec.hostNetwork).toBeUndefined();
    expect(d.spec.template.spec.dnsPolicy).toBe('ClusterFirst');
    expect(op.ports.every((p: any) => p.hostPort === undefined)).toBe(true);

    const onDelete = find(
      await template([
        ...REQUIRED,
        ...CREDENTIAL_FORMS.secret!,
        'agent.updateStrategy.type=OnDelete',
        'operator.podDisruptionBudget.enabled=false',
      ]),
      'DaemonSet',
    );
    expect(onDelete.spec.updateStrategy).toEqual({ type: 'OnDelete' });
  });

  it('takes credentials in three forms and never puts a secret in args or plain env', async () => {
    const byForm: Record<string, any> = {};
    for (const [form, values] of Object.entries(CREDENTIAL_FORMS)) {
      const objs = await template([...REQUIRED, ...values]);
      byForm[form] = { objs, pod: find(objs, 'Deployment').spec.template.spec };
      expect(objs.some((o) => o.kind === 'Secret')).toBe(false);
      for (const w of objs.filter((o) => o.kind === 'Deployment' || o.kind === 'DaemonSet')) {
        for (const c of containers(w)) {
          for (const e of c.env ?? []) if (/SECRET|ACCESS_KEY|TOKEN$/.test(e.name)) expect(e.value).toBeUndefined();
          expect((c.args ?? []).filter((a: string) => /access-key|secret=|password|token=/i.test(a))).toEqual([]);
        }
      }
    }
    const secretPod = byForm.secret.pod;
    expect(secretPod.volumes).toEqual([
      {
        name: 'credentials',
        secret: {
          secretName: 'eni-ipam-access-key',
          defaultMode: 0o440,
          items: [
            { key: 'access-key-id', path: 'access-key-id' },
            { key: 'access-key-secret', path: 'access-key-secret' },
          ],
        },
      },
    ]);
    expect(byForm.ramRole.pod.containers[0].args).toContain('--ram-role=KubernetesWorkerRole');
    expect(byForm.ramRole.pod.volumes).toBeUndefined();
    const rrsa = byForm.rrsa.pod;
    expect(find(byForm.rrsa.objs, 'ServiceAccount', '-operator').metadata.annotations).toEqual({
      'pod-identity.alibabacloud.com/role-name': 'eni-ipam',
    });
    expect(rrsa.volumes[0].projected.sources[0].serviceAccountToken).toEqual({
      audience: 'sts.aliyuncs.com',
      expirationSeconds: 3600,
      path: 'token',
    });
    const env = Object.fromEntries(
      rrsa.containers[0].env.filter((e: any) => e.name.startsWith('ALIBABA_CLOUD_')).map((e: any) => [e.name, e.value]),
    );
    expect(env).toEqual({
      ALIBABA_CLOUD_ROLE_ARN: 'acs:ram::1234567890123456:role/eni-ipam',
      ALIBABA_CLOUD_OIDC_PROVIDER_ARN: 'acs:ram::1234567890123456:oidc-provider/ack-rrsa-c1',
      ALIBABA_CLOUD_OIDC_TOKEN_FILE: `${rrsa.containers[0].volumeMounts[0].mountPath}/token`,
    });
  });

  it('renders per-action limits, a default class and the monitoring objects from values', async () => {
    const objs = await template([
      ...REQUIRED,
      ...CREDENTIAL_FORMS.secret!,
      'operator.apiLimits.DescribeNetworkInterfaces.perMinute=600',
      'operator.apiLimits.CreateNetworkInterface.perMinute=250',
      'operator.apiLimits.CreateNetworkInterface.burst=50',
      'defaultClass.create=true',
      'monitoring.serviceMonitor.enabled=true',
      'monitoring.prometheusRule.enabled=true',
      'monitoring.grafanaDashboard.enabled=true',
    ]);
    expect(find(objs, 'Deployment').spec.template.spec.containers[0].args).toContain(
      '--api-limits=CreateNetworkInterface=250:50,DescribeNetworkInterfaces=600',
    );
    expect(find(objs, 'ENIPoolClass')).toMatchObject({
      metadata: { name: 'default' },
      spec: { vSwitchTags: { role: 'pods' }, preAllocate: 8 },
    });
    expect(
      objs
        .filter((o) => o.kind === 'ServiceMonitor')
        .map((o: any) => o.spec.selector.matchLabels['app.kubernetes.io/component']),
    ).toEqual(['operator', 'agent']);
    const alerts = find(objs, 'PrometheusRule').spec.groups[0].rules.map((r: any) => r.alert);
    expect(alerts).toEqual([
      'EniIpamThrottled',
      'EniIpamActionNearQuota',
      'EniIpamNodeInDeficit',
      'EniIpamVSwitchNearlyFull',
      'EniIpamVSwitchExhaustionForecast',
      'EniIpamZonePoolsCannotReachPreAllocate',
      'EniIpamPoolsExhausted',
      'EniIpamLeakedEnisCollected',
      'EniIpamCloudUnavailable',
      'EniIpamNoLeader',
    ]);
    const dash = find(objs, 'ConfigMap', '-dashboard');
    expect(dash.metadata.labels.grafana_dashboard).toBe('1');
    const panels = JSON.parse(dash.data['eni-ipam.json']).panels.map((p: any) => p.title);
    expect(panels).toEqual(
      expect.arrayContaining([
        'OpenAPI calls per second by action',
        'OpenAPI latency p99 by action',
        'Limiter wait p99 by action',
        'Pool IPs per node',
        'Nodes by pool state',
        'CNI allocation latency (agents)',
        'vSwitch headroom: free and pooled addresses',
        'Zone headroom: free and pooled addresses',
        'vSwitch time to exhaustion (forecast)',
        'vSwitch consumption (addresses per hour)',
      ]),
    );
    expect(panels.some((t: string) => t.startsWith('Quota headroom by action'))).toBe(true);
  });

  it('is accepted by a Kubernetes API server with the real kubectl apply', async () => {
    const objs = await template([...REQUIRED, ...CREDENTIAL_FORMS.rrsa!, 'defaultClass.create=true']);
    const { emu } = await kube();
    try {
      const k = kubectlFor(emu);
      // CRDs first and established, then everything else (an ENIPoolClass needs its CRD).
      const crds = objs.filter((o) => o.kind === 'CustomResourceDefinition');
      const rest = objs.filter((o) => o.kind !== 'CustomResourceDefinition');
      const applyCrds = await k(['apply', '-f', '-'], crds.map((o) => YAML.stringify(o)).join('---\n'));
      expect(applyCrds.stderr).toBe('');
      expect(
        (
          await k([
            'wait',
            '--for=condition=Established',
            'crd/enipools.eniipam.io',
            'crd/enipoolclasses.eniipam.io',
            '--timeout=20s',
          ])
        ).code,
      ).toBe(0);
      const applied = await k(['apply', '-f', '-'], rest.map((o) => YAML.stringify(o)).join('---\n'));
      expect(applied.stderr).toBe('');
      expect(applied.code).toBe(0);
      expect(applied.stdout.trim().split('\n').length).toBe(rest.length);
      const got = await k([
        'get',
        '-n',
        'kube-system',
        'deployment/eni-ipam-operator',
        'daemonset/eni-ipam-agent',
        'serviceaccount/eni-ipam-operator',
        'configmap/eni-ipam-cni',
        '-o',
        'name',
      ]);
      expect(got.stdout.trim().split('\n')).toEqual([
        'deployment.apps/eni-ipam-operator',
        'daemonset.apps/eni-ipam-agent',
        'serviceaccount/eni-ipam-operator',
        'configmap/eni-ipam-cni',
      ]);
      expect((await k(['get', 'enipoolclasses', '-o', 'name'])).stdout.trim()).toBe('enipoolclass.eniipam.io/default');
      // A second apply changes nothing. (kubectl reports a PodDisruptionBudget "configured" on any
      // API server: its selector's patch strategy is "replace", so the patch it computes is never empty.)
      const again = await k(['apply', '-f', '-'], rest.map((o) => YAML.stringify(o)).join('---\n'));
      expect(again.code).toBe(0);
      expect(
        again.stdout
          .trim()
          .split('\n')
          .filter((l) => !l.endsWith(' unchanged')),
      ).toEqual(['poddisruptionbudget.policy/eni-ipam-operator configured']);
    } finally {
      await emu.close();
    }
  }, 60_000);
});
