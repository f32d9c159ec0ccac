/** Attribute values as plain JS: OTLP AnyValue with arrays and key-value lists unfolded. */
export type AttrValue = string | number | boolean | null | AttrValue[] | AttrMap;
export interface AttrMap {
  [key: string]: AttrValue;
}

export interface OtlpEvent {
  timeUnixNano: bigint;
  name: string;
  attributes: AttrMap;
}

/** One span of an export request, normalised from either encoding. */
export interface OtlpSpan {
  resource: AttrMap;
  scope: { name: string; version: string };
  /** Lowercase hex; validity (length, not all zero) is checked at ingestion, where a bad id rejects one span. */
  traceId: string;
  spanId: string;
  /** "" for a root span. */
  parentSpanId: string;
  name: string;
  kind: number;
  startTimeUnixNano: bigint;
  endTimeUnixNano: bigint;
  attributes: AttrMap;
  events: OtlpEvent[];
  /** Position in the request, for error messages ("span 2 of scope 0 of resource 1"). */
  position: { resource: number; scope: number; span: number };
}

export type OtlpEncoding = "protobuf" | "json";

export class OtlpDecodeError extends Error {
  constructor(
    message: string,
    /** `malformed` -> 400, `unsupported_media_type` -> 415, `too_large` -> 413. */
    readonly kind: "malformed" | "unsupported_media_type" | "too_large" = "malformed",
  ) {
    super(message);
    this.name = "OtlpDecodeError";
  }
}
