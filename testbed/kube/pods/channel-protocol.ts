import { EventEmitter } from 'node:events';
import { PassThrough } from 'node:stream';
import { WebSocket, type RawData } from 'ws';
import type { ExecRequest, ExecSession, TerminalSize } from './pod-exec.js';

/** The WebSocket subprotocols of remote commands served, newest first (kubectl 1.30+ offers v5 only). */
export const CHANNEL_PROTOCOLS = ['v5.channel.k8s.io', 'v4.channel.k8s.io'];

/** The channels: each binary message starts with its channel's byte. */
const STDIN = 0;
const STDOUT = 1;
const STDERR = 2;
/** The outcome: one Status object, then the connection closes. */
const ERROR = 3;
/** Terminal sizes from the client, as JSON `{"Width":W,"Height":H}`. */
const RESIZE = 4;
/** v5: `[255, channel]` closes that channel (the client's end of stdin). */
const CLOSE = 255;

const asBuffer = (data: RawData): Buffer =>
  Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data);

/** The Status the kubelet's streaming server ends a command with (what kubectl turns into its exit code). */
export function execOutcome(command: string[], exitCode: number): Record<string, unknown> {
  if (exitCode === 0) return { metadata: {}, status: 'Success' };
  return {
    metadata: {},
    status: 'Failure',
    message:
      `command terminated with non-zero exit code: error executing command [${command.join(' ')}], ` +
      `exit code ${exitCode}`,
    reason: 'NonZeroExitCode',
    details: { causes: [{ reason: 'ExitCode', message: String(exitCode) }] },
  };
}

/** The Status of a command that could not run at all. */
export function execFailure(error: Error): Record<string, unknown> {
  const message = `error executing command in container: ${error.message}`;
  return {
    metadata: {},
    status: 'Failure',
    message: `Internal error occurred: ${message}`,
    reason: 'InternalError',
    details: { causes: [{ message }] },
    code: 500,
  };
}

/**
 * Runs an exec session over an upgraded WebSocket that speaks a channel.k8s.io protocol:
 * stdin from channel 0 (closed by `[255, 0]` in v5), terminal sizes from channel 4, stdout
 * and stderr out on channels 1 and 2, then the outcome's Status on channel 3 and a normal close.
 * The client going away aborts the session.
 */
export function serveChannels(ws: WebSocket, request: ExecRequest, session: ExecSession): void {
  const v5 = ws.protocol === 'v5.channel.k8s.io';
  const stdin = request.stdin ? new PassThrough() : undefined;
  const sizes = new EventEmitter();
  const gone = new AbortController();
  const send = (channel: number, data: Buffer) => {
    if (ws.readyState === WebSocket.OPEN) ws.send(Buffer.concat([Buffer.of(channel), data]));
  };
  ws.on('message', (raw) => {
    const data = asBuffer(raw);
    if (!data.length) return;
    const channel = data[0];
    if (v5 && channel === CLOSE) {
      if (data[1] === STDIN) stdin?.end();
    } else if (channel === STDIN) {
      if (stdin?.writable) stdin.write(data.subarray(1));
    } else if (channel === RESIZE) {
      try {
        const size = JSON.parse(data.subarray(1).toString('utf8')) as { Width?: unknown; Height?: unknown };
        if (typeof size.Width === 'number' && typeof size.Height === 'number')
          sizes.emit('resize', { width: size.Width, height: size.Height } satisfies TerminalSize);
      } catch {
        // Not a size: ignored, as the kubelet does.
      }
    }
  });
  ws.on('close', () => {
    gone.abort();
    stdin?.end();
  });
  ws.on('error', () => undefined);
  session({
    stdin,
    stdout: request.stdout ? (d) => send(STDOUT, d) : undefined,
    stderr: request.stderr ? (d) => send(STDERR, d) : undefined,
    onResize: (listener) => sizes.on('resize', listener),
    signal: gone.signal,
  })
    .then(
      (code) => execOutcome(request.command, code),
      (e: Error) => execFailure(e),
    )
    .then((status) => {
      send(ERROR, Buffer.from(JSON.stringify(status)));
      if (ws.readyState === WebSocket.OPEN) ws.close(1000);
    });
}
