/**
 * Errors that capability code throws. They carry what went wrong, never an HTTP status:
 * each service's HTTP layer maps the kind to a status and its own error shape.
 */
export type ErrorKind =
  | "invalid"
  | "unsupported"
  | "unauthorized"
  | "forbidden"
  | "not_found"
  | "conflict"
  | "too_large"
  | "unsupported_media_type"
  | "rate_limited"
  | "quota_exceeded"
  | "unavailable"
  | "not_implemented";

export class AppError extends Error {
  constructor(
    readonly kind: ErrorKind,
    message: string,
    /** Where the problem is, as a location path (`["body", "messages", 0, "role"]`). */
    readonly loc?: (string | number)[],
    /** A short machine-readable code (`model_not_found`, `concurrency_limit`, …). */
    readonly code?: string,
  ) {
    super(message);
    this.name = "AppError";
  }
}

export const invalid = (message: string, loc?: (string | number)[], code?: string) => new AppError("invalid", message, loc, code);
/** A well-formed request for something this server cannot do (a 400, not a validation error). */
export const unsupported = (message: string, param?: string, code?: string) =>
  new AppError("unsupported", message, param ? [param] : undefined, code);
export const notFound = (message: string, code?: string) => new AppError("not_found", message, undefined, code);
export const forbidden = (message: string, code?: string) => new AppError("forbidden", message, undefined, code);
export const conflict = (message: string) => new AppError("conflict", message);
export const notImplemented = (message: string) => new AppError("not_implemented", message, undefined, "not_implemented");
