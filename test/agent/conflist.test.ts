import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import pino from 'pino';
import { ConflistByMode, readConflist } from '../../src/agent/conflist.js';
import { exclusiveUnavailable } from '../../src/agent/datapath/exclusive.js';
import { ROOT } from '../helpers/helm.js';

const SHARED = `${ROOT}examples/10-eni-ipam.conflist`;
const EXCLUSIVE = `${ROOT}examples/10-eni-ipam-exclusive.conflist`;
const logger = pino({ level: 'silent' });
const parsed = (path: string) => JSON.parse(readFileSync(path, 'utf8'));

describe('the conflist by eniMode', () => {
  it('tells the mode of each example: eni-ipam-cni as ptp’s IPAM is Shared, as the main plugin Exclusive', () => {
    expect(readConflist(SHARED).mode).toBe('Shared');
    expect(readConflist(EXCLUSIVE).mode).toBe('Exclusive');
  });

  it('installs the conflist of the pool’s mode under one name, only on a change, and leaves no temporary file', () => {
    const confDir = mkdtempSync(join(tmpdir(), 'conflist-'));
    const byMode = new ConflistByMode({
      confDir,
      sources: { Shared: SHARED, Exclusive: EXCLUSIVE },
      logger,
      node: 'n',
    });
    byMode.follow('Exclusive');
    const installed = join(confDir, '10-eni-ipam.conflist');
    expect(parsed(installed)).toEqual(parsed(EXCLUSIVE));
    // Not written again while the mode stays: an operator's hand edit (or another tool's) is left until a switch.
    writeFileSync(installed, '{"edited":true}');
    byMode.follow('Exclusive');
    expect(parsed(installed)).toEqual({ edited: true });
    byMode.follow('Shared');
    expect(parsed(installed)).toEqual(parsed(SHARED));
    expect(readdirSync(confDir)).toEqual(['10-eni-ipam.conflist']);
  });

  it('refuses sources of the wrong mode or not eni-ipam’s, naming the file and the example to use', () => {
    const dir = mkdtempSync(join(tmpdir(), 'conflist-'));
    const other = join(dir, 'other.conflist');
    writeFileSync(other, JSON.stringify({ cniVersion: '1.0.0', name: 'x', plugins: [{ type: 'bridge' }] }));
    const make = (Shared: string, Exclusive: string) => () =>
      new ConflistByMode({ confDir: dir, sources: { Shared, Exclusive }, logger, node: 'n' });
    expect(make(SHARED, SHARED)).toThrow(
      `the Exclusive conflist ${SHARED} is for Shared pools: an Exclusive pool runs eni-ipam-cni as the main plugin (examples/10-eni-ipam-exclusive.conflist)`,
    );
    expect(make(EXCLUSIVE, EXCLUSIVE)).toThrow(`the Shared conflist ${EXCLUSIVE} is for Exclusive pools`);
    expect(make(other, EXCLUSIVE)).toThrow(
      `the conflist ${other} has no plugin of type, or with ipam.type, eni-ipam-cni`,
    );
    expect(make(join(dir, 'missing'), EXCLUSIVE)).toThrow(`the conflist ${join(dir, 'missing')} cannot be installed`);
  });

  it('a folder it cannot write is logged and tried again on the next change, not thrown at the pool watch', () => {
    const dir = mkdtempSync(join(tmpdir(), 'conflist-'));
    const blocked = join(dir, 'file');
    writeFileSync(blocked, '');
    const byMode = new ConflistByMode({
      confDir: blocked,
      sources: { Shared: SHARED, Exclusive: EXCLUSIVE },
      logger,
      node: 'n',
    });
    // Said, not thrown: the agent then offers no exclusive ENI until it is in place.
    expect(byMode.follow('Exclusive')).toBe(false);
    // Nothing was installed, so the same mode is tried again once the folder is one.
    rmSync(blocked);
    mkdirSync(blocked);
    expect(byMode.follow('Exclusive')).toBe(true);
    expect(parsed(join(blocked, '10-eni-ipam.conflist'))).toEqual(parsed(EXCLUSIVE));
  });
});

describe('whether the agent can move ENIs into pods', () => {
  const status = (capEff: string) => `Name:\tnode\nCapInh:\t0000000000000000\nCapEff:\t${capEff}\n`;
  it('needs CAP_SYS_ADMIN (bit 21) in the effective set, and names the chart value that gives it', () => {
    expect(exclusiveUnavailable(status('000001ffffffffff'))).toBeUndefined();
    expect(exclusiveUnavailable(status('0000000000201000'))).toBeUndefined(); // NET_ADMIN and SYS_ADMIN
    expect(exclusiveUnavailable(status('0000000000001000'))).toBe(
      'the agent lacks CAP_SYS_ADMIN, which entering a pod’s network namespace takes; with the chart, set ' +
        'agent.exclusiveENIs=true (it adds the capability and mounts the host’s /var/run/netns)',
    );
  });
});
