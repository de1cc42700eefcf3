import { pino, type DestinationStream, type Logger } from 'pino';

export type { Logger } from 'pino';

/** Fields that may hold a credential; pino replaces their values before a line is written. */
export const REDACTED_PATHS = [
  'accessKeySecret',
  'securityToken',
  'signature',
  'url',
  '*.accessKeySecret',
  '*.securityToken',
  '*.signature',
  '*.url',
  'err.url',
  'err.entry',
  'err.data',
];

/** A structured JSON logger with stable field names (`node`, `eni`, `action`, ...). */
export function createLogger(opts: { level?: string; name?: string } = {}, destination?: DestinationStream): Logger {
  return pino(
    {
      name: opts.name ?? 'eni-ipam',
      level: opts.level ?? process.env.LOG_LEVEL ?? 'info',
      redact: { paths: REDACTED_PATHS, censor: '<redacted>' },
      base: undefined,
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination,
  );
}

export const silentLogger = (): Logger => pino({ level: 'silent' });
