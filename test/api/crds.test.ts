import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import YAML from 'yaml';
import { renderCrds } from '../../src/api/render.js';
import type { ENIPool, ENIPoolClass } from '../../src/api/types.js';
import type { ControlPlane } from '../../testbed/control-plane/index.js';
import { http, kube, kubectlFor, type Kubectl } from '../helpers/kube.js';

const CRD_DIR = new URL('../../crds/', import.meta.url);
/** The copy the chart installs (Helm takes a chart's CRDs from its own crds/ folder). */
const CHART_CRD_DIR = new URL('../../charts/eni-ipam/crds/', import.meta.url);

describe('generated CRDs', () => {
  it('match the checked-in crds/ and the chart’s copy (run `npm run gen:crds` after changing src/api)', () => {
    for (const [file, text] of Object.entries(renderCrds())) {
      expect(readFileSync(new URL(file, CRD_DIR), 'utf8')).toBe(text);
      // A stale copy installs a schema without the new fields: found when a status field was added.
      expect(readFileSync(new URL(file, CHART_CRD_DIR), 'utf8')).toBe(text);
    }
  });
});

describe('the CRDs on an API server', () => {
  let emu: ControlPlane;
  let k: Kubectl;
  beforeAll(async () => {
    ({ emu } = await kube());
    k = kubectlFor(emu);
    const applied = await k(['apply', '-f', new URL('.', CRD_DIR).pathname]);
    expect(applied.stderr).toBe('');
    await k([
      'wait',
      '--for=condition=Established',
      'crd/enipools.eniipam.io',
      'crd/enipoolclasses.eniipam.io',
      '--timeout=10s',
    ]);
  });
  afterAll(() => emu.close());

  it('fill the defaults of an ENIPoolClass', async () => {
    const r = await k(
      ['apply', '-f', '-'],
      'apiVersion: eniipam.io/v1alpha1\nkind: ENIPoolClass\nmetadata: {name: default}\nspec:\n  vSwitchTags: {role: pods}\n',
    );
    expect(r.stdout).toBe('enipoolclass.eniipam.io/default created\n');
    const c = YAML.parse((await k(['get', 'enipc', 'default', '-o', 'yaml'])).stdout) as ENIPoolClass;
    expect(c.spec).toMatchObject({
      priority: 0,
      vSwitchSelection: 'MostFreeIPs',
      minAllocate: 0,
      preAllocate: 8,
      maxAboveWatermark: 0,
      maxAllocate: 0,
      releaseExcessIPs: true,
      releaseDelaySeconds: 180,
      deleteEmptyENIs: false,
    });
    const empty = await k(
      ['apply', '-f', '-'],
      'apiVersion: eniipam.io/v1alpha1\nkind: ENIPoolClass\nmetadata: {name: everything}\n',
    );
    expect(empty.code).toBe(0);
  });

  it('refuse nonsense with a message that names the field', async () => {
    const r = await k(
      ['apply', '-f', '-'],
      'apiVersion: eniipam.io/v1alpha1\nkind: ENIPoolClass\nmetadata: {name: bad}\nspec:\n  minAllocate: -2\n  vSwitchSelection: Random\n  securityGroupIDs: [a, b, c, d, e, f]\n',
    );
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(
      'spec.minAllocate: Invalid value: -2: spec.minAllocate in body should be greater than or equal to 0',
    );
    expect(r.stderr).toContain(
      'spec.vSwitchSelection: Unsupported value: "Random": supported values: "MostFreeIPs", "Ordered"',
    );
    expect(r.stderr).toContain('spec.securityGroupIDs: Too many: 6: must have at most 5 items');
    const pool = await k(
      ['apply', '-f', '-'],
      'apiVersion: eniipam.io/v1alpha1\nkind: ENIPool\nmetadata: {name: p}\nspec: {}\n',
    );
    expect(pool.stderr).toContain('spec.nodeName: Required value');
  });

  it('show pools with their printer columns', async () => {
    const pool: ENIPool = {
      apiVersion: 'eniipam.io/v1alpha1',
      kind: 'ENIPool',
      metadata: { name: 'node-1' },
      spec: { nodeName: 'node-1', instanceType: 'ecs.g7.xlarge', zoneID: 'cn-hangzhou-h', className: 'default' },
    };
    expect((await k(['apply', '-f', '-'], JSON.stringify(pool))).code).toBe(0);
    const status: ENIPool['status'] = {
      summary: { enis: 2, available: 28, used: 5, needed: 0, releasing: 0 },
      conditions: [
        { type: 'Exhausted', status: 'False' },
        {
          type: 'Ready',
          status: 'True',
          reason: 'PoolFull',
          lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
        },
      ],
    };
    const r = await http(
      emu,
      'PATCH',
      '/apis/eniipam.io/v1alpha1/enipools/node-1/status',
      { status },
      'application/merge-patch+json',
    );
    expect(r.status).toBe(200);
    const table = await k(['get', 'enipools']);
    expect(table.stdout).toMatch(
      /^NAME\s+INSTANCE-TYPE\s+ENIS\s+AVAILABLE\s+USED\s+NEEDED\s+READY\s+AGE\nnode-1\s+ecs\.g7\.xlarge\s+2\s+28\s+5\s+0\s+True\s+\d+s\n$/,
    );
    const wide = await k(['get', 'enip', '-o', 'wide']);
    expect(wide.stdout).toMatch(/ZONE\s+CLASS/);
    expect(wide.stdout).toMatch(/cn-hangzhou-h\s+default/);
  });
});
