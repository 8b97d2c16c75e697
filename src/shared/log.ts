/**
 * Structured logging: one JSON object per line. Fields are data, never credentials: callers pass
 * ids and hashes, and {@link redact} strips anything whose name looks like a secret as a last guard.
 */
export interface Logger {
  info(event: string, fields?: Record<string, unknown>): void;
  warn(event: string, fields?: Record<string, unknown>): void;
  error(event: string, fields?: Record<string, unknown>): void;
}

const SECRET_FIELD = /token|secret|password|code_verifier|^code$|authorization|cookie/i;

/** Replaces the value of every field whose name looks like a secret, in nested plain objects too. */
export function redact(fields: Record<string, unknown> = {}, depth = 0): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(fields)) {
    if (SECRET_FIELD.test(k)) out[k] = "[redacted]";
    else if (
      depth < 4 &&
      v !== null &&
      typeof v === "object" &&
      Object.getPrototypeOf(v) === Object.prototype
    ) {
      out[k] = redact(v as Record<string, unknown>, depth + 1);
    } else out[k] = v;
  }
  return out;
}

/** A logger writing JSON lines to a stream (stderr by default). */
export function jsonLogger(write: (line: string) => void = (l) => process.stderr.write(l)): Logger {
  const emit = (level: string, event: string, fields?: Record<string, unknown>) =>
    write(`${JSON.stringify({ time: new Date().toISOString(), level, event, ...redact(fields) })}\n`);
  return {
    info: (e, f) => emit("info", e, f),
    warn: (e, f) => emit("warn", e, f),
    error: (e, f) => emit("error", e, f),
  };
}

export const silentLogger: Logger = { info() {}, warn() {}, error() {} };
