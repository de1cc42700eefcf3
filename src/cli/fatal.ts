import type { Logger } from '../observability/logger.js';

/**
 * An error that nothing handles (thrown out of a command, or from a callback) ends the process
 * with one JSON log line, level fatal with the error and its stack in `err`, and exit 1: not
 * Node's stack trace in plain lines, which log collectors split into one entry per line.
 */
export function exitOnUnhandledErrors(logger: Logger, what: string): void {
  const fatal = (err: unknown) => {
    logger.fatal({ err }, `${what} failed`);
    process.exit(1);
  };
  process.on('uncaughtException', fatal);
  process.on('unhandledRejection', fatal);
}
