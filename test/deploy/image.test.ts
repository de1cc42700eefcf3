import { execFile } from 'node:child_process';
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { runCli } from '../helpers/cli.js';
import { ROOT } from '../helpers/helm.js';

interface Stage {
  from: string;
  name?: string;
  lines: Array<{ op: string; args: string }>;
}

/** The Dockerfile as stages of instructions (continuation lines joined, comments dropped). */
function stages(text: string): Stage[] {
  const out: Stage[] = [];
  const joined = text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  for (const line of joined) {
    const [op, ...rest] = line.split(/\s+/);
    const args = rest.join(' ');
    if (op!.toUpperCase() === 'FROM') {
      const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args)!;
      out.push({ from: m[1]!, name: m[2], lines: [] });
    } else out.at(-1)!.lines.push({ op: op!.toUpperCase(), args });
  }
  return out;
}

/** ldd's verdict on a file (it exits 1 for a static one, saying so). */
const ldd = (file: string) =>
  new Promise<string>((resolve) => execFile('ldd', [file], (_err, stdout, stderr) => resolve(`${stdout}${stderr}`)));

describe('the container image', () => {
  const dockerfile = stages(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'));
  const runtime = dockerfile.at(-1)!;

  it('is built in stages from a pinned Node 20 slim base', () => {
    expect(dockerfile.length).toBeGreaterThanOrEqual(2);
    for (const s of dockerfile) expect(s.from).toMatch(/^node:20\.\d+\.\d+-[a-z]+-slim(@sha256:[0-9a-f]{64})?$/);
    expect(dockerfile[0]!.lines).toContainEqual({ op: 'RUN', args: expect.stringMatching(/^npm ci\b/) });
    expect(dockerfile[0]!.lines.some((l) => l.op === 'RUN' && l.args === 'npm run build:product')).toBe(true);
    // npm run build compiles the static plugin: the build stage has gcc and libc's static archive, before the build.
    const build = dockerfile[0]!.lines;
    const compiler = build.findIndex(
      (l) => l.op === 'RUN' && /apt-get install\b.*\bgcc\b/.test(l.args) && /\blibc6-dev\b/.test(l.args),
    );
    expect(compiler).toBeGreaterThanOrEqual(0);
    expect(compiler).toBeLessThan(build.findIndex((l) => l.op === 'RUN' && l.args.includes('npm run build')));
    // The product only: the testbed, the suites and the tests never enter the build.
    expect(build.filter((l) => l.op === 'COPY' && /\b(testbed|test|bench|chaos)\b/.test(l.args))).toEqual([]);
    expect(build.some((l) => l.op === 'COPY' && l.args.startsWith('scripts/build-cni.sh '))).toBe(true);
  });

  it('ships production dependencies only, the compiled code from the build stage, and no remote ADD', () => {
    expect(runtime.lines.some((l) => l.op === 'RUN' && /npm ci\b.*--omit=dev/.test(l.args))).toBe(true);
    const fromBuild = runtime.lines.filter(
      (l) => l.op === 'COPY' && l.args.startsWith(`--from=${dockerfile[0]!.name} `),
    );
    expect(fromBuild.map((l) => l.args.split(/\s+/).slice(1))).toEqual([
      ['/src/dist/src', './dist/src'],
      ['/src/dist/bin', './dist/bin'],
    ]);
    expect(
      runtime.lines.filter(
        (l) => l.op === 'COPY' && !l.args.startsWith('--from=') && /\b(src|test|node_modules)\b/.test(l.args),
      ),
    ).toEqual([]);
    for (const s of dockerfile) expect(s.lines.filter((l) => l.op === 'ADD' && /https?:\/\//.test(l.args))).toEqual([]);
    expect(runtime.lines).toContainEqual({ op: 'ENV', args: 'NODE_ENV=production' });
  });

  it('runs as a non-root user with eni-ipam as the entry point, and has eni-ipam-cni for the init container', () => {
    const user = runtime.lines.filter((l) => l.op === 'USER').at(-1)!.args;
    expect(user.split(':')[0]).toMatch(/^[1-9]\d*$/);
    // The launcher: dist/src/cli/main.js only exports run() and does nothing when executed.
    expect(runtime.lines.filter((l) => l.op === 'ENTRYPOINT').at(-1)!.args).toBe('["node", "/app/bin/eni-ipam"]');
    expect(runtime.lines.some((l) => l.op === 'COPY' && l.args.startsWith('bin '))).toBe(true);
    expect(runtime.lines.some((l) => l.op === 'RUN' && l.args.includes('/usr/local/bin/eni-ipam-cni'))).toBe(true);
    // The agent's datapath runs `ip` (iproute2), which the slim base image lacks.
    expect(runtime.lines.some((l) => l.op === 'RUN' && /apt-get install\b.*\biproute2\b/.test(l.args))).toBe(true);
  });

  it('needs no devDependency at run time, and every dependency is one the product imports', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
    const files = (dir: string): string[] =>
      readdirSync(dir).flatMap((f) =>
        statSync(join(dir, f)).isDirectory() ? files(join(dir, f)) : f.endsWith('.js') ? [join(dir, f)] : [],
      );
    const imported = new Set<string>();
    for (const f of files(join(ROOT, 'dist', 'src'))) {
      for (const m of readFileSync(f, 'utf8').matchAll(/(?:from|import\()\s*'([^'.][^']*)'/g)) {
        if (m[1]!.startsWith('node:')) continue;
        imported.add(m[1]!.startsWith('@') ? m[1]!.split('/').slice(0, 2).join('/') : m[1]!.split('/')[0]!);
      }
    }
    expect(imported.size).toBeGreaterThan(3);
    expect([...imported].filter((p) => !pkg.dependencies[p])).toEqual([]);
    // `npm ls --omit=dev` lists what the product uses, nothing the testbed alone needs.
    expect(Object.keys(pkg.dependencies).filter((p) => !imported.has(p))).toEqual([]);
  });

  it('runs from what the image holds: the product commands work, the testbed commands say where they are', async () => {
    const cli = productInstall(['bin', 'dist/src', 'dist/bin', 'package.json']);
    // The CLI imports every product module when it starts: a package missing from the image fails here.
    for (const command of ['operator', 'agent', 'install-cni']) {
      const help = await cli([command, '--help']);
      expect(help).toMatchObject({ code: 0, stderr: '' });
      expect(help.stdout).toContain(`Usage: eni-ipam ${command} [flags]`);
    }
    const demo = await cli(['demo', '--nodes', '3']);
    expect(demo.code).toBe(2);
    expect(demo.stderr).toBe(
      'eni-ipam demo: this command is part of the testbed (the emulators, the local cluster and the demo), which ' +
        'this installation does not carry: the image and `npm ci --omit=dev` hold the product only. From a clone ' +
        'of the repository: `npm ci && npm run build`, then `./bin/eni-ipam demo`\n',
    );
    expect((await cli(['--help'])).stdout).toMatch(/^ {2}emulate cluster .* Not installed here\.$/m);
  });

  it('in a built clone whose devDependencies are gone, the product runs and the testbed says what it lacks', async () => {
    const cli = productInstall(['bin', 'dist/src', 'dist/bin', 'dist/testbed', 'package.json']);
    const help = await cli(['operator', '--help']);
    expect(help).toMatchObject({ code: 0, stderr: '' });
    expect((await cli(['--help'])).code).toBe(0);
    const demo = await cli(['demo']);
    expect(demo.code).toBe(2);
    expect(demo.stderr).toMatch(
      /^eni-ipam demo: this command is part of the testbed, which is built here but cannot load \(Cannot find package '[^']+'.*\): install its packages with `npm ci` \(without --omit=dev\), then `npm run build`\n$/,
    );
  });
});

/**
 * An installation without a container engine: `parts` of this checkout copied (not linked: Node
 * resolves a module by its real path, which would find the rest of the checkout), and only the
 * packages `npm ci --omit=dev` installs (the lockfile's non-dev top-level entries, linked). Answers
 * a function that runs its bin/eni-ipam.
 */
function productInstall(parts: string[]) {
  const app = mkdtempSync(join(tmpdir(), 'image-'));
  const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { dev?: boolean }>;
  };
  for (const [path, entry] of Object.entries(lock.packages)) {
    // Top-level packages only: a nested node_modules comes with its parent's directory.
    if (!path || entry.dev || path.split('node_modules/').length !== 2) continue;
    mkdirSync(dirname(join(app, path)), { recursive: true });
    symlinkSync(join(ROOT, path), join(app, path));
  }
  for (const part of parts) cpSync(join(ROOT, part), join(app, part), { recursive: true, dereference: true });
  return (args: string[]) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
      execFile(join(app, 'bin/eni-ipam'), args, (err, stdout, stderr) =>
        resolve({ code: err ? Number(err.code) : 0, stdout, stderr }),
      ),
    );
}

describe('eni-ipam install-cni (the init container)', () => {
  const install = (host: string) =>
    runCli([
      'install-cni',
      '--bin-dir',
      join(host, 'opt/cni/bin'),
      '--conf-dir',
      join(host, 'etc/cni/net.d'),
      '--conflist',
      join(ROOT, 'examples/10-eni-ipam.conflist'),
    ]);

  it('installs one static binary that runs with an empty environment, and the conflist', async () => {
    const host = mkdtempSync(join(tmpdir(), 'host-'));
    // What an earlier version left on the host: a Node.js runtime and the plugin's code.
    mkdirSync(join(host, 'opt/cni/bin/eni-ipam.d/lib'), { recursive: true });
    writeFileSync(join(host, 'opt/cni/bin/eni-ipam.d/node'), 'an old runtime');
    writeFileSync(join(host, 'opt/cni/bin/ptp'), 'another plugin');
    const r = await install(host);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(
      `installed ${join(host, 'opt/cni/bin/eni-ipam-cni')}\ninstalled ${join(host, 'etc/cni/net.d/10-eni-ipam.conflist')}\n`,
    );
    expect(JSON.parse(readFileSync(join(host, 'etc/cni/net.d/10-eni-ipam.conflist'), 'utf8'))).toEqual(
      JSON.parse(readFileSync(join(ROOT, 'examples/10-eni-ipam.conflist'), 'utf8')),
    );
    const installed = join(host, 'opt/cni/bin/eni-ipam-cni');
    expect(readFileSync(installed).equals(readFileSync(join(ROOT, 'dist/bin/eni-ipam-cni')))).toBe(true);
    expect(statSync(installed).mode & 0o777).toBe(0o755);
    expect(await ldd(installed)).toMatch(/not a dynamic executable|statically linked/);
    // As a container runtime calls it: an empty environment but the CNI variables.
    const out = await new Promise<string>((resolve, reject) => {
      const child = execFile(installed, [], { env: { CNI_COMMAND: 'VERSION' } }, (err, stdout) =>
        err ? reject(err) : resolve(stdout),
      );
      child.stdin!.end('{"cniVersion":"1.0.0"}');
    });
    expect(JSON.parse(out)).toEqual({
      cniVersion: '1.0.0',
      supportedVersions: ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'],
    });
    // Installing again (an agent pod restarting) replaces it in place; nothing else is there.
    expect((await install(host)).code).toBe(0);
    expect(readdirSync(join(host, 'opt/cni/bin')).sort()).toEqual(['eni-ipam-cni', 'ptp']);
    expect(readdirSync(join(host, 'etc/cni/net.d'))).toEqual(['10-eni-ipam.conflist']);
  }, 30_000);

  it('refuses a conflist that does not use eni-ipam-cni, saying so', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'conf-'));
    writeFileSync(
      join(dir, 'other.conflist'),
      JSON.stringify({ cniVersion: '1.0.0', name: 'x', plugins: [{ type: 'bridge', ipam: { type: 'host-local' } }] }),
    );
    const r = await runCli([
      'install-cni',
      '--bin-dir',
      join(dir, 'bin'),
      '--conf-dir',
      join(dir, 'net.d'),
      '--conflist',
      join(dir, 'other.conflist'),
    ]);
    expect(r).toMatchObject({
      code: 2,
      stderr: `eni-ipam install-cni: the conflist ${join(dir, 'other.conflist')} has no plugin of type, or with ipam.type, eni-ipam-cni\n`,
    });
  });
});
