import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';
import { createLogger, servingLogger, silentLogger } from '../../src/observability/logger.js';

/** A logger at `level` whose lines are kept. */
function capture(level: string): { logger: ReturnType<typeof createLogger>; lines: string[] } {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      lines.push(...String(chunk).split('\n').filter(Boolean));
      cb();
    },
  });
  return { logger: createLogger({ level, name: 'test' }, stream), lines };
}

describe('the logger', () => {
  it('writes one JSON object per line with the level by name', () => {
    const { logger, lines } = capture('debug');
    logger.debug({ node: 'n1' }, 'one');
    logger.info('two');
    logger.warn({ eni: 'eni-1' }, 'three');
    logger.error({ err: new Error('four\nwith a second line') }, 'four');
    logger.fatal('five');
    expect(lines).toHaveLength(5);
    const entries = lines.map((l) => JSON.parse(l) as { level: string; msg: string });
    expect(entries.map((e) => [e.level, e.msg])).toEqual([
      ['debug', 'one'],
      ['info', 'two'],
      ['warn', 'three'],
      ['error', 'four'],
      ['fatal', 'five'],
    ]);
  });

  it('writes the serving line whatever its level, and nothing else below that level', () => {
    const { logger, lines } = capture('warn');
    logger.info('hidden');
    servingLogger(logger).info({ metrics: 'http://127.0.0.1:1/metrics' }, 'serving');
    servingLogger(logger).debug('hidden too');
    logger.warn('shown');
    expect(lines.map((l) => JSON.parse(l) as Record<string, unknown>)).toEqual([
      expect.objectContaining({ level: 'info', msg: 'serving', metrics: 'http://127.0.0.1:1/metrics' }),
      expect.objectContaining({ level: 'warn', msg: 'shown' }),
    ]);
    expect(servingLogger(silentLogger()).isLevelEnabled('info')).toBe(false);
  });

  it('ends the process on an error nothing handles with one fatal JSON line and exit 1', async () => {
    const dist = (path: string) => fileURLToPath(new URL(`../../dist/src/${path}`, import.meta.url));
    const script = [
      `import { createLogger } from ${JSON.stringify(dist('observability/logger.js'))};`,
      `import { exitOnUnhandledErrors } from ${JSON.stringify(dist('cli/fatal.js'))};`,
      `exitOnUnhandledErrors(createLogger({ name: 'eni-ipam-agent' }), 'agent');`,
      `setTimeout(() => Promise.reject(new Error('the disk went away')), 10);`,
      `setTimeout(() => {}, 5000);`,
    ].join('\n');
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const [code] = await once(child, 'exit');
    expect({ code, stderr }).toEqual({ code: 1, stderr: '' });
    const lines = stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({
      level: 'fatal',
      msg: 'agent failed',
      err: { message: 'the disk went away', stack: expect.stringContaining('Error: the disk went away') },
    });
  });
});
