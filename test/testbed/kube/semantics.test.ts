import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { KubeEmulator } from '../../../testbed/kube/index.js';
import { WIDGETS, WIDGET_CRD, widget } from '../../helpers/kube.js';
import { http, kube } from '../../helpers/kube-emulator.js';

let emu: KubeEmulator;
beforeAll(async () => {
  ({ emu } = await kube());
  expect((await http(emu, 'POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', WIDGET_CRD)).status).toBe(
    201,
  );
});
afterAll(() => emu.close());

const create = (name: string, spec?: Record<string, unknown>, labels?: Record<string, string>) =>
  http(emu, 'POST', WIDGETS, widget(name, spec, labels));
const merge = (path: string, body: unknown, query = '') =>
  http(emu, 'PATCH', `${path}${query}`, body, 'application/merge-patch+json');

describe('CRDs', () => {
  it('registers the kind at once, with discovery and the accepted conditions', async () => {
    const crd = await http(emu, 'GET', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.io');
    expect(crd.body.status.conditions.map((c: { type: string; status: string }) => `${c.type}=${c.status}`)).toEqual([
      'NamesAccepted=True',
      'Established=True',
    ]);
    expect(crd.body.status.acceptedNames).toMatchObject({ kind: 'Widget', listKind: 'WidgetList', singular: 'widget' });
    const groups = await http(emu, 'GET', '/apis');
    expect(groups.body.groups.map((g: { name: string }) => g.name)).toContain('example.io');
    const resources = await http(emu, 'GET', '/apis/example.io/v1');
    expect(resources.body.resources.map((r: { name: string }) => r.name)).toEqual(['widgets', 'widgets/status']);
    const openapi = await http(emu, 'GET', '/openapi/v3');
    expect(openapi.body.paths['apis/example.io/v1'].serverRelativeURL).toMatch(
      /^\/openapi\/v3\/apis\/example\.io\/v1\?hash=/,
    );
  });

  it('rejects a non-structural schema with the field that lacks a type', async () => {
    const bad = structuredClone(WIDGET_CRD);
    bad.metadata.name = 'gadgets.example.io';
    Object.assign(bad.spec.names, { plural: 'gadgets', singular: 'gadget', kind: 'Gadget', shortNames: [] });
    (bad.spec.versions[0]!.schema.openAPIV3Schema.properties.spec.properties as Record<string, unknown>).loose = {
      description: 'no type',
    };
    const r = await http(emu, 'POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', bad);
    expect(r.status).toBe(422);
    expect(r.body.reason).toBe('Invalid');
    expect(r.body.details.causes[0].field).toBe(
      'spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[loose].type',
    );
  });

  it('applies a changed CRD at once', async () => {
    const crdPath = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.io';
    const setColors = async (colors: string[]) => {
      const crd = (await http(emu, 'GET', crdPath)).body;
      crd.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.color.enum = colors;
      expect((await http(emu, 'PUT', crdPath, crd)).status).toBe(200);
    };
    await setColors(['red', 'blue', 'green']);
    expect((await create('green-one', { size: 1, color: 'green' })).status).toBe(201);
    await setColors(['red', 'blue']);
    expect((await create('green-two', { size: 1, color: 'green' })).status).toBe(422);
  });

  it('removes the kind and its objects with the CRD', async () => {
    const other = structuredClone(WIDGET_CRD);
    other.metadata.name = 'things.example.io';
    Object.assign(other.spec.names, { plural: 'things', singular: 'thing', kind: 'Thing', shortNames: [] });
    await http(emu, 'POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', other);
    await http(emu, 'POST', '/apis/example.io/v1/namespaces/default/things', { ...widget('t1'), kind: 'Thing' });
    await http(emu, 'DELETE', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/things.example.io');
    expect((await http(emu, 'GET', '/apis/example.io/v1/namespaces/default/things')).status).toBe(404);
  });
});

describe('create, update and conflicts', () => {
  it('sets uid, resourceVersion, creationTimestamp and generation, and refuses a second create', async () => {
    const r = await create('c1', { size: 2 });
    expect(r.status).toBe(201);
    expect(r.body.metadata).toMatchObject({ generation: 1, namespace: 'default' });
    expect(r.body.metadata.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(r.body.metadata.creationTimestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    const again = await create('c1');
    expect(again).toMatchObject({
      status: 409,
      body: { reason: 'AlreadyExists', message: 'widgets.example.io "c1" already exists' },
    });
  });

  it('answers a custom resource with its keys sorted at every level, as Go writes unstructured JSON', async () => {
    const made = await create('sorted', { size: 3, color: 'blue', tags: { zeta: '1', alpha: '2' } });
    expect(Object.keys(made.body.spec)).toEqual(['color', 'size', 'tags']);
    const got = await http(emu, 'GET', `${WIDGETS}/sorted`);
    expect(Object.keys(got.body)).toEqual(['apiVersion', 'kind', 'metadata', 'spec']);
    expect(Object.keys(got.body.spec.tags)).toEqual(['alpha', 'zeta']);
  });

  it('generates names, and needs a name or generateName', async () => {
    const r = await http(emu, 'POST', WIDGETS, { ...widget(''), metadata: { generateName: 'gen-' } });
    expect(r.body.metadata.name).toMatch(/^gen-[a-z0-9]{5}$/);
    const none = await http(emu, 'POST', WIDGETS, { ...widget(''), metadata: {} });
    expect(none.status).toBe(422);
    expect(none.body.message).toContain('metadata.name: Required value: name or generateName is required');
  });

  it('answers a stale resourceVersion with 409 Conflict, and a custom-object PUT without one with 422', async () => {
    const v1 = (await create('c2')).body;
    const ok = await http(emu, 'PUT', `${WIDGETS}/c2`, { ...v1, spec: { size: 5 } });
    expect(ok.status).toBe(200);
    const stale = await http(emu, 'PUT', `${WIDGETS}/c2`, { ...v1, spec: { size: 6 } });
    expect(stale).toMatchObject({
      status: 409,
      body: {
        reason: 'Conflict',
        message:
          'Operation cannot be fulfilled on widgets.example.io "c2": the object has been modified; please apply your changes to the latest version and try again',
      },
    });
    const noRv = await http(emu, 'PUT', `${WIDGETS}/c2`, {
      ...v1,
      metadata: { ...v1.metadata, resourceVersion: undefined },
    });
    expect(noRv.status).toBe(422);
    expect(noRv.body.message).toContain(
      'metadata.resourceVersion: Invalid value: 0x0: must be specified for an update',
    );
    const rvInPatch = await merge(`${WIDGETS}/c2`, {
      metadata: { resourceVersion: v1.metadata.resourceVersion },
      spec: { size: 1 },
    });
    expect(rvInPatch.status).toBe(409);
  });

  it('bumps generation on spec changes only, and not for a no-op write', async () => {
    const o = (await create('c3')).body;
    const labeled = await merge(`${WIDGETS}/c3`, { metadata: { labels: { a: 'b' } } });
    expect(labeled.body.metadata.generation).toBe(1);
    const specced = await merge(`${WIDGETS}/c3`, { spec: { size: 9 } });
    expect(specced.body.metadata.generation).toBe(2);
    const noop = await merge(`${WIDGETS}/c3`, { spec: { size: 9 } });
    expect(noop.body.metadata.resourceVersion).toBe(specced.body.metadata.resourceVersion);
    expect(Number(specced.body.metadata.resourceVersion)).toBeGreaterThan(Number(o.metadata.resourceVersion));
  });

  it('keeps status and spec apart with the status subresource', async () => {
    await create('c4', { size: 1 });
    const viaMain = await merge(`${WIDGETS}/c4`, { spec: { size: 2 }, status: { phase: 'Ignored' } });
    expect(viaMain.body.status).toBeUndefined();
    const viaStatus = await merge(`${WIDGETS}/c4/status`, { spec: { size: 99 }, status: { phase: 'Ready', count: 3 } });
    expect(viaStatus.body).toMatchObject({ spec: { size: 2 }, status: { phase: 'Ready', count: 3 } });
    expect(viaStatus.body.metadata.generation).toBe(2);
    const got = await http(emu, 'GET', `${WIDGETS}/c4/status`);
    expect(got.body.status.phase).toBe('Ready');
  });

  it('needs the namespace to exist', async () => {
    const r = await http(emu, 'POST', '/apis/example.io/v1/namespaces/nowhere/widgets', {
      ...widget('x'),
      metadata: { name: 'x' },
    });
    expect(r).toMatchObject({ status: 404, body: { reason: 'NotFound', message: 'namespaces "nowhere" not found' } });
  });
});

describe('pruning, defaulting and validation', () => {
  it('prunes unknown fields under Ignore, warns under Warn (and when nothing is said), refuses under Strict', async () => {
    const body = widget('p1', { size: 1, shape: 'round', free: { anything: { goes: true } } });
    const ignored = await http(emu, 'POST', `${WIDGETS}?fieldValidation=Ignore`, body);
    expect(ignored.body.spec).toEqual({ size: 1, color: 'red', free: { anything: { goes: true } } });
    const warned = await http(emu, 'POST', `${WIDGETS}?fieldValidation=Warn`, { ...body, metadata: { name: 'p2' } });
    expect(warned.status).toBe(201);
    expect(warned.headers.get('warning')).toBe('299 - "unknown field \\"spec.shape\\""');
    const strict = await http(emu, 'POST', `${WIDGETS}?fieldValidation=Strict`, { ...body, metadata: { name: 'p3' } });
    expect(strict).toMatchObject({ status: 400, body: { reason: 'BadRequest' } });
    expect(strict.body.message).toContain('strict decoding error: unknown field "spec.shape"');
    // Without the parameter the server warns and prunes (v1.23+), as for Warn.
    const unsaid = await http(emu, 'POST', WIDGETS, { ...body, metadata: { name: 'p4' } });
    expect(unsaid.status).toBe(201);
    expect(unsaid.headers.get('warning')).toBe('299 - "unknown field \\"spec.shape\\""');
    expect(unsaid.body.spec).not.toHaveProperty('shape');
  });

  it('fills defaults and rejects values outside the schema with per-field causes', async () => {
    expect((await create('d1', {})).body.spec).toEqual({ size: 1, color: 'red' });
    const bad = await create('d2', { size: 'big', color: 'green', tags: { a: 1 } });
    expect(bad.status).toBe(422);
    expect(bad.body.details.causes).toEqual([
      {
        reason: 'FieldValueInvalid',
        field: 'spec.size',
        message: 'Invalid value: "big": spec.size in body must be of type integer: "string"',
      },
      {
        reason: 'FieldValueNotSupported',
        field: 'spec.color',
        message: 'Unsupported value: "green": supported values: "red", "blue"',
      },
      {
        reason: 'FieldValueInvalid',
        field: 'spec.tags.a',
        message: 'Invalid value: 1: spec.tags.a in body must be of type string: "integer"',
      },
    ]);
    expect(bad.body.message).toMatch(/^Widget\.example\.io "d2" is invalid: \[spec\.size: Invalid value/);
  });
});

describe('deletion and finalizers', () => {
  it('marks an object with finalizers as deleting, refuses new finalizers, and deletes it when the last goes', async () => {
    await http(emu, 'POST', WIDGETS, { ...widget('f1'), metadata: { name: 'f1', finalizers: ['a/x', 'a/y'] } });
    const del = await http(emu, 'DELETE', `${WIDGETS}/f1`);
    expect(del.status).toBe(200);
    expect(del.body.metadata.deletionTimestamp).toBeTruthy();
    expect(del.body.metadata.generation).toBe(2);
    const add = await merge(`${WIDGETS}/f1`, { metadata: { finalizers: ['a/x', 'a/y', 'a/z'] } });
    expect(add.status).toBe(422);
    expect(add.body.message).toContain('no new finalizers can be added if the object is being deleted');
    await merge(`${WIDGETS}/f1`, { metadata: { finalizers: ['a/y'] } });
    expect((await http(emu, 'GET', `${WIDGETS}/f1`)).status).toBe(200);
    await merge(`${WIDGETS}/f1`, { metadata: { finalizers: [] } });
    expect((await http(emu, 'GET', `${WIDGETS}/f1`)).status).toBe(404);
  });

  it('honours dryRun=All on create and delete', async () => {
    expect((await http(emu, 'POST', `${WIDGETS}?dryRun=All`, widget('dry'))).status).toBe(201);
    expect((await http(emu, 'GET', `${WIDGETS}/dry`)).status).toBe(404);
    await create('dry2');
    expect((await http(emu, 'DELETE', `${WIDGETS}/dry2?dryRun=All`)).status).toBe(200);
    expect((await http(emu, 'GET', `${WIDGETS}/dry2`)).status).toBe(200);
  });
});

describe('patches', () => {
  it('refuses strategic merge patch on custom objects and accepts it on built-ins', async () => {
    await create('s1');
    const smp = await http(
      emu,
      'PATCH',
      `${WIDGETS}/s1`,
      { spec: { size: 2 } },
      'application/strategic-merge-patch+json',
    );
    expect(smp).toMatchObject({ status: 415, body: { reason: 'UnsupportedMediaType' } });
    await http(emu, 'POST', '/api/v1/namespaces/default/pods', {
      metadata: { name: 'p' },
      spec: {
        containers: [
          { name: 'a', image: 'x' },
          { name: 'b', image: 'y' },
        ],
      },
    });
    const r = await http(
      emu,
      'PATCH',
      '/api/v1/namespaces/default/pods/p',
      { spec: { containers: [{ name: 'b', image: 'z' }] } },
      'application/strategic-merge-patch+json',
    );
    expect(r.body.spec.containers).toEqual([
      { name: 'a', image: 'x' },
      { name: 'b', image: 'z' },
    ]);
  });

  it('requires fieldManager for apply and forbids force elsewhere', async () => {
    const noManager = await http(
      emu,
      'PATCH',
      `${WIDGETS}/s1`,
      widget('s1', { size: 3 }),
      'application/apply-patch+yaml',
    );
    expect(noManager.status).toBe(422);
    expect(noManager.body.message).toBe(
      'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
    );
    const force = await merge(`${WIDGETS}/s1`, { spec: { size: 3 } }, '?force=true');
    expect(force.status).toBe(422);
    expect(force.body.message).toContain('force: Forbidden: may not be specified for non-apply patch');
  });

  it('creates with apply and answers conflicts between managers with 409 and causes', async () => {
    const yaml = (size: number) =>
      `apiVersion: example.io/v1\nkind: Widget\nmetadata:\n  name: s2\nspec:\n  size: ${size}\n`;
    const first = await http(emu, 'PATCH', `${WIDGETS}/s2?fieldManager=a`, yaml(1), 'application/apply-patch+yaml');
    expect(first.status).toBe(201);
    const clash = await http(emu, 'PATCH', `${WIDGETS}/s2?fieldManager=b`, yaml(2), 'application/apply-patch+yaml');
    expect(clash.status).toBe(409);
    expect(clash.body.details.causes).toEqual([
      { reason: 'FieldManagerConflict', message: 'conflict with "a"', field: '.spec.size' },
    ]);
    const forced = await http(
      emu,
      'PATCH',
      `${WIDGETS}/s2?fieldManager=b&force=true`,
      yaml(2),
      'application/apply-patch+yaml',
    );
    expect(forced.body.spec.size).toBe(2);
    // Manager a stops applying spec.size: b still owns it, so it stays.
    await http(
      emu,
      'PATCH',
      `${WIDGETS}/s2?fieldManager=a`,
      'apiVersion: example.io/v1\nkind: Widget\nmetadata:\n  name: s2\n',
      'application/apply-patch+yaml',
    );
    expect((await http(emu, 'GET', `${WIDGETS}/s2`)).body.spec.size).toBe(2);
  });

  it('answers a failed JSON patch test with 422', async () => {
    const r = await http(
      emu,
      'PATCH',
      `${WIDGETS}/s1`,
      [{ op: 'test', path: '/spec/size', value: 42 }],
      'application/json-patch+json',
    );
    expect(r.status).toBe(422);
  });
});

describe('lists and selectors', () => {
  beforeAll(async () => {
    for (const [n, l] of [
      ['l1', { env: 'prod', tier: 'web' }],
      ['l2', { env: 'dev', tier: 'web' }],
      ['l3', { env: 'prod' }],
    ] as const)
      await create(n, { size: 1 }, l);
  });

  it.each([
    ['env=prod', ['l1', 'l3']],
    ['env==prod,tier=web', ['l1']],
    ['env!=prod,tier', ['l2']],
    ['env in (dev, prod),!tier', ['l3']],
    ['env notin (prod),tier', ['l2']],
  ])('label selector %s', async (sel, names) => {
    const r = await http(emu, 'GET', `${WIDGETS}?labelSelector=${encodeURIComponent(sel)}`);
    expect(r.body.items.map((o: { metadata: { name: string } }) => o.metadata.name)).toEqual(names);
  });

  it('refuses a malformed label selector and an unsupported field selector', async () => {
    expect((await http(emu, 'GET', `${WIDGETS}?labelSelector=${encodeURIComponent('env in prod')}`)).status).toBe(400);
    const f = await http(emu, 'GET', `${WIDGETS}?fieldSelector=spec.size%3D1`);
    expect(f).toMatchObject({ status: 400, body: { message: 'field label not supported: spec.size' } });
    const name = await http(emu, 'GET', `${WIDGETS}?fieldSelector=metadata.name%3Dl2`);
    expect(name.body.items).toHaveLength(1);
  });

  it('selects Pods by node and phase and Events by involved object', async () => {
    for (const [n, node, phase] of [
      ['pa', 'n1', 'Running'],
      ['pb', 'n2', 'Pending'],
      ['pc', 'n1', 'Pending'],
    ]) {
      await http(emu, 'POST', '/api/v1/namespaces/default/pods', {
        metadata: { name: n },
        spec: { nodeName: node, containers: [] },
        status: { phase },
      });
    }
    const r = await http(
      emu,
      'GET',
      `/api/v1/pods?fieldSelector=${encodeURIComponent('spec.nodeName=n1,status.phase!=Running')}`,
    );
    expect(r.body.items.map((p: { metadata: { name: string } }) => p.metadata.name)).toEqual(['pc']);
    await http(emu, 'POST', '/api/v1/namespaces/default/events', {
      metadata: { name: 'e1' },
      involvedObject: { kind: 'Widget', name: 'l1', namespace: 'default' },
      reason: 'X',
      message: 'y',
    });
    const ev = await http(
      emu,
      'GET',
      `/api/v1/namespaces/default/events?fieldSelector=${encodeURIComponent('involvedObject.name=l1,involvedObject.kind=Widget')}`,
    );
    expect(ev.body.items).toHaveLength(1);
  });

  it('chunks with limit and continue, from one snapshot', async () => {
    const p1 = await http(emu, 'GET', `${WIDGETS}?limit=2`);
    expect(p1.body.items).toHaveLength(2);
    expect(p1.body.metadata.continue).toBeTruthy();
    const all: string[] = p1.body.items.map((o: { metadata: { name: string } }) => o.metadata.name);
    let token = p1.body.metadata.continue;
    while (token) {
      const p = await http(emu, 'GET', `${WIDGETS}?limit=2&continue=${encodeURIComponent(token)}`);
      expect(p.body.metadata.resourceVersion).toBe(p1.body.metadata.resourceVersion);
      all.push(...p.body.items.map((o: { metadata: { name: string } }) => o.metadata.name));
      token = p.body.metadata.continue;
    }
    const full = await http(emu, 'GET', WIDGETS);
    expect(all).toEqual(full.body.items.map((o: { metadata: { name: string } }) => o.metadata.name));
  });

  it('follows resourceVersion and resourceVersionMatch rules on lists', async () => {
    const rv = Number((await http(emu, 'GET', WIDGETS)).body.metadata.resourceVersion);
    expect((await http(emu, 'GET', `${WIDGETS}?resourceVersion=0`)).status).toBe(200);
    expect((await http(emu, 'GET', `${WIDGETS}?resourceVersion=${rv}&resourceVersionMatch=Exact`)).status).toBe(200);
    expect(
      (await http(emu, 'GET', `${WIDGETS}?resourceVersion=${rv + 1000}&resourceVersionMatch=NotOlderThan`)).status,
    ).toBe(504);
    expect((await http(emu, 'GET', `${WIDGETS}?resourceVersionMatch=Exact`)).status).toBe(400);
  });

  it('serves Tables with printer columns and metadata-only rows', async () => {
    const res = await fetch(`${emu.url}${WIDGETS}/l1`, {
      headers: { accept: 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json' },
    });
    const t = (await res.json()) as {
      kind: string;
      columnDefinitions: Array<{ name: string; priority: number }>;
      rows: Array<{ cells: unknown[]; object: { kind: string } }>;
    };
    expect(t.kind).toBe('Table');
    expect(t.columnDefinitions.map((c) => c.name)).toEqual(['Name', 'Size', 'Color', 'Phase', 'Age']);
    expect(t.columnDefinitions.find((c) => c.name === 'Color')!.priority).toBe(1);
    expect(t.rows[0]!.cells.slice(0, 4)).toEqual(['l1', 1, 'red', null]);
    expect(t.rows[0]!.cells[4]).toMatch(/^\d+s$/);
    expect(t.rows[0]!.object.kind).toBe('PartialObjectMetadata');
  });
});

describe('faults and persistence', () => {
  it('answers 429 with Retry-After and 500 when asked, and counts requests', async () => {
    emu.setFaults({ errors: { code: 429, rate: 1, retryAfterSeconds: 2 } });
    const r = await http(emu, 'GET', WIDGETS);
    expect(r).toMatchObject({ status: 429, body: { reason: 'TooManyRequests', details: { retryAfterSeconds: 2 } } });
    expect(r.headers.get('retry-after')).toBe('2');
    emu.setFaults({ errors: { code: 500, rate: 1 } });
    expect((await http(emu, 'GET', WIDGETS)).status).toBe(500);
    emu.setFaults({});
    expect(emu.requests()['list widgets.example.io']).toBeGreaterThan(2);
  });

  it('refuses connections for a while', async () => {
    await emu.refuseConnections(300);
    await expect(fetch(`${emu.url}/version`)).rejects.toThrow();
    await new Promise((r) => setTimeout(r, 450));
    expect((await fetch(`${emu.url}/version`)).status).toBe(200);
  });

  it('keeps its objects and kinds across a restart with a state file', async () => {
    const statePath = join(mkdtempSync(join(tmpdir(), 'kube-state-')), 'state.json');
    const a = await kube({ statePath });
    await http(a.emu, 'POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', WIDGET_CRD);
    await http(a.emu, 'POST', WIDGETS, widget('kept', { size: 4 }));
    const rv = (await http(a.emu, 'GET', WIDGETS)).body.metadata.resourceVersion;
    await a.emu.close();
    const b = await kube({ statePath });
    const got = await http(b.emu, 'GET', `${WIDGETS}/kept`);
    expect(got.body.spec.size).toBe(4);
    expect(Number((await http(b.emu, 'GET', WIDGETS)).body.metadata.resourceVersion)).toBeGreaterThanOrEqual(
      Number(rv),
    );
    await b.emu.close();
  });
});

describe('the scale subresource', () => {
  it('reads and writes the replica count through autoscaling/v1 Scale', async () => {
    const crd = structuredClone(WIDGET_CRD);
    crd.metadata.name = 'pools.example.io';
    Object.assign(crd.spec.names, { plural: 'pools', singular: 'pool', kind: 'Pool', shortNames: [] });
    const v = crd.spec.versions[0]! as Record<string, unknown>;
    v.subresources = { status: {}, scale: { specReplicasPath: '.spec.size', statusReplicasPath: '.status.count' } };
    await http(emu, 'POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd);
    const base = '/apis/example.io/v1/namespaces/default/pools';
    await http(emu, 'POST', base, { ...widget('p'), kind: 'Pool', spec: { size: 2 } });
    const scale = await http(emu, 'GET', `${base}/p/scale`);
    expect(scale.body).toMatchObject({
      kind: 'Scale',
      apiVersion: 'autoscaling/v1',
      spec: { replicas: 2 },
      status: { replicas: 0 },
    });
    const patched = await http(
      emu,
      'PATCH',
      `${base}/p/scale`,
      { spec: { replicas: 5 } },
      'application/merge-patch+json',
    );
    expect(patched.body.spec.replicas).toBe(5);
    expect((await http(emu, 'GET', `${base}/p`)).body.spec.size).toBe(5);
    expect(
      (await http(emu, 'PATCH', `${base}/p/scale`, { spec: { replicas: -1 } }, 'application/merge-patch+json')).status,
    ).toBe(422);
    const discovery = await http(emu, 'GET', '/apis/example.io/v1');
    expect(discovery.body.resources.map((r: { name: string }) => r.name)).toContain('pools/scale');
  });
});

describe('watch details', () => {
  it('closes a watch cleanly after timeoutSeconds and counts open watches', async () => {
    const t0 = Date.now();
    const res = await fetch(`${emu.url}${WIDGETS}?watch=true&timeoutSeconds=1&resourceVersion=0`);
    expect(res.status).toBe(200);
    expect(emu.openWatches()).toBeGreaterThanOrEqual(1);
    const text = await res.text();
    expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
    const events = text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { type: string });
    expect(events.length).toBeGreaterThan(0);
    expect(events.every((e) => e.type === 'ADDED')).toBe(true);
    expect(emu.openWatches()).toBe(0);
  });

  it('adds latency to every request when asked', async () => {
    emu.setFaults({ latencyMs: 200 });
    const t0 = Date.now();
    await http(emu, 'GET', '/version');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(190);
    emu.setFaults({});
  });
});
