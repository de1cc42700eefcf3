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

/**
 * A structured JSON logger with stable field names (`node`, `eni`, `action`, ...): one object
 * per line, its level by name (`"level":"info"`), as log collectors and people read it.
 */
export function createLogger(opts: { level?: string; name?: string } = {}, destination?: DestinationStream): Logger {
  return pino(
    {
      name: opts.name ?? 'eni-ipam',
      level: opts.level ?? process.env.LOG_LEVEL ?? 'info',
      redact: { paths: REDACTED_PATHS, censor: '<redacted>' },
      base: undefined,
      formatters: { level: (label) => ({ level: label }) },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination,
  );
}

/**
 * The logger of the line that says where a program serves (`"msg":"serving"` with its URLs):
 * at level info whatever the logger's level (a silent logger stays silent), since scripts that
 * start a program on port 0 read its ports from that line, as they read the emulators'
 * `listening URL` line.
 */
export function servingLogger(logger: Logger): Logger {
  return logger.level === 'silent' ? logger : logger.child({}, { level: 'info' });
}

export const silentLogger = (): Logger => pino({ level: 'silent' });
