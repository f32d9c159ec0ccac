import type { IncomingMessage } from "node:http";
import zlib from "node:zlib";
import getRawBody from "raw-body";
import { AppError, invalid } from "../errors.js";

export interface ReadBody {
  /** Parsed JSON, the text of a text body, or the raw bytes of a binary one. */
  value: unknown;
  contentType: string;
}

/**
 * Reads a request body within `limit` bytes (before and after decompression, so a small gzip bomb is refused
 * too), and parses it according to the content types the operation accepts.
 */
export async function readRequestBody(req: IncomingMessage, accepted: string[], limit: number): Promise<ReadBody> {
  const contentType = (req.headers["content-type"] ?? "").split(";")[0].trim().toLowerCase();
  const type = contentType || (accepted.includes("application/json") ? "application/json" : accepted[0]);
  if (!accepted.includes(type)) {
    throw new AppError("unsupported_media_type", `Unsupported content type '${contentType}'; expected ${accepted.join(" or ")}.`);
  }
  const raw = await readLimited(req, limit);
  const bytes = decompress(raw, String(req.headers["content-encoding"] ?? "identity").toLowerCase(), limit);
  if (type === "application/json" || type.endsWith("+json")) return { value: parseJson(bytes), contentType: type };
  if (type.startsWith("text/") || type === "application/jsonl" || type === "application/x-ndjson") {
    return { value: bytes.toString("utf8"), contentType: type };
  }
  return { value: bytes, contentType: type };
}

async function readLimited(req: IncomingMessage, limit: number): Promise<Buffer> {
  try {
    return await getRawBody(req, { limit });
  } catch (err) {
    if ((err as { type?: string }).type === "entity.too.large") throw tooLarge(limit);
    throw invalid(`Could not read the request body: ${(err as Error).message}`, ["body"], "body_read_error");
  }
}

function decompress(raw: Buffer, encoding: string, limit: number): Buffer {
  if (encoding === "identity" || encoding === "" || raw.length === 0) return raw;
  try {
    if (encoding === "gzip" || encoding === "x-gzip") return zlib.gunzipSync(raw, { maxOutputLength: limit });
    if (encoding === "deflate") return inflateEither(raw, limit);
  } catch (err) {
    if ((err as { code?: string }).code === "ERR_BUFFER_TOO_LARGE") throw tooLarge(limit);
    throw new AppError("unsupported", `The body is not valid ${encoding} data: ${(err as Error).message}`, ["body"], "bad_encoding");
  }
  throw new AppError("unsupported_media_type", `Unsupported content encoding '${encoding}'; expected gzip or deflate.`);
}

/** `deflate` is zlib-wrapped by the standard, but some clients send a raw deflate stream. */
function inflateEither(raw: Buffer, limit: number): Buffer {
  try {
    return zlib.inflateSync(raw, { maxOutputLength: limit });
  } catch (err) {
    if ((err as { code?: string }).code === "ERR_BUFFER_TOO_LARGE") throw err;
    return zlib.inflateRawSync(raw, { maxOutputLength: limit });
  }
}

function parseJson(bytes: Buffer): unknown {
  if (bytes.length === 0) throw invalid("A JSON body is required.", ["body"], "missing");
  try {
    return JSON.parse(bytes.toString("utf8"));
  } catch (err) {
    throw invalid(`JSON decode error: ${(err as Error).message}`, ["body"], "json_invalid");
  }
}

function tooLarge(limit: number): AppError {
  return new AppError("too_large", `Request body is larger than ${limit} bytes.`, undefined, "request_too_large");
}
