import pino, { type Logger } from "pino";

export type { Logger };

/** JSON lines on stdout. Request logs never include headers or bodies, so keys and content stay out of logs. */
export function createLogger(level = process.env.GYRE_LOG_LEVEL ?? "info"): Logger {
  return pino({
    level,
    base: { app: "gyre" },
    redact: { paths: ["*.authorization", "*.apiKey", "*.api_key", "*.key"], censor: "[redacted]" },
    timestamp: pino.stdTimeFunctions.isoTime,
  });
}
