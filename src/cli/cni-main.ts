import { CNI_ERRORS, CniError, runCni } from '../agent/cni-plugin.js';

/** Entry point of eni-ipam-cni: a CNI IPAM plugin that a container runtime executes. */
async function main(): Promise<number> {
  const chunks: Buffer[] = [];
  if (!process.stdin.isTTY) for await (const c of process.stdin) chunks.push(c as Buffer);
  const stdin = Buffer.concat(chunks).toString('utf8');
  try {
    const result = await runCni({ env: process.env, stdin });
    if (result !== undefined) process.stdout.write(`${JSON.stringify(result)}\n`);
    return 0;
  } catch (e) {
    const err = e instanceof CniError ? e : new CniError(CNI_ERRORS.io, (e as Error).message);
    let version = '1.0.0';
    try {
      version = JSON.parse(stdin).cniVersion ?? version;
    } catch {
      // keep the default
    }
    process.stdout.write(`${JSON.stringify({ cniVersion: version, code: err.code, msg: err.message, details: err.details })}\n`);
    return 1;
  }
}

process.exitCode = await main();
