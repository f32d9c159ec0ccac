import { AppError } from "../errors.js";

/** A request the engine understands but llama.cpp cannot honour (mapped to 400). */
export class UnsupportedRequestError extends AppError {
  constructor(message: string, param?: string) {
    super("unsupported", message, param ? [param] : undefined, "unsupported_parameter");
    this.name = "UnsupportedRequestError";
  }
}

/** A malformed request (mapped to 400). */
export class InvalidRequestError extends AppError {
  constructor(message: string, param?: string, code = "invalid_request") {
    super("invalid", message, param ? [param] : undefined, code);
    this.name = "InvalidRequestError";
  }
}

/** All sequences are busy and the waiting queue is full (mapped to 429). */
export class QueueFullError extends AppError {
  constructor(message = "The engine's request queue is full; retry later") {
    super("rate_limited", message, undefined, "concurrency_limit");
    this.name = "QueueFullError";
  }
}

/** The request was cancelled through its AbortSignal. */
export class GenerationAbortedError extends Error {
  constructor() {
    super("generation aborted");
    this.name = "GenerationAbortedError";
  }
}
