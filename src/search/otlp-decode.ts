import zlib from "node:zlib";
import { WireReader, WireError, WIRE_LEN, WIRE_VARINT, WIRE_FIXED64 } from "./protobuf-wire.js";
import { OtlpDecodeError, type AttrMap, type AttrValue, type OtlpEncoding, type OtlpEvent, type OtlpSpan } from "./otlp-types.js";

export interface DecodeOptions {
  /** The request's Content-Type (parameters such as `; charset=utf-8` are ignored). */
  contentType: string | undefined;
  /** The request's Content-Encoding: gzip, deflate, identity or absent. */
  contentEncoding?: string | undefined;
  /** Upper bound on the body after decompression; guards against compression bombs. */
  maxBytes?: number;
}

export interface DecodedTraces {
  encoding: OtlpEncoding;
  spans: OtlpSpan[];
}

const DEFAULT_MAX_BYTES = 64 * 1024 * 1024;

/** The response encoding that matches a request's Content-Type, or an `unsupported_media_type` error. */
export function otlpEncodingOf(contentType: string | undefined): OtlpEncoding {
  const type = (contentType ?? "").split(";")[0].trim().toLowerCase();
  if (type === "application/x-protobuf" || type === "application/protobuf") return "protobuf";
  if (type === "application/json") return "json";
  throw new OtlpDecodeError(`Unsupported content type '${type}'.`, "unsupported_media_type");
}

/** Decodes an OTLP/HTTP ExportTraceServiceRequest body (protobuf or JSON, optionally compressed). */
export function decodeTraceRequest(body: Uint8Array, options: DecodeOptions): DecodedTraces {
  const encoding = otlpEncodingOf(options.contentType);
  const bytes = decompress(body, options.contentEncoding, options.maxBytes ?? DEFAULT_MAX_BYTES);
  const spans = encoding === "protobuf" ? decodeProtobufTraceRequest(bytes) : decodeJsonTraceRequest(parseJsonBody(bytes));
  return { encoding, spans };
}

function decompress(body: Uint8Array, contentEncoding: string | undefined, maxBytes: number): Uint8Array {
  const coding = (contentEncoding ?? "identity").trim().toLowerCase();
  try {
    if (coding === "" || coding === "identity") return body;
    if (coding === "gzip" || coding === "x-gzip") return zlib.gunzipSync(body, { maxOutputLength: maxBytes });
    // Some clients send raw deflate under "deflate" although HTTP means zlib-wrapped; accept both.
    if (coding === "deflate") {
      const looksZlib = body.length >= 2 && (body[0] & 0x0f) === 8 && ((body[0] << 8) | body[1]) % 31 === 0;
      return looksZlib ? zlib.inflateSync(body, { maxOutputLength: maxBytes }) : zlib.inflateRawSync(body, { maxOutputLength: maxBytes });
    }
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === "ERR_BUFFER_TOO_LARGE") throw new OtlpDecodeError(`Decompressed body is larger than ${maxBytes} bytes.`, "too_large");
    throw new OtlpDecodeError(`malformed ${coding} body: ${(err as Error).message}`);
  }
  throw new OtlpDecodeError(`Unsupported content encoding '${coding}'.`, "unsupported_media_type");
}

// ---- protobuf -------------------------------------------------------------------------------------------
// Field numbers from opentelemetry/proto (collector/trace/v1, trace/v1, resource/v1, common/v1).

/** The spans of a protobuf ExportTraceServiceRequest (already decompressed). */
export function decodeProtobufTraceRequest(bytes: Uint8Array): OtlpSpan[] {
  const spans: OtlpSpan[] = [];
  try {
    const reader = new WireReader(bytes);
    let resourceIndex = 0;
    while (!reader.done()) {
      const [field, wire] = reader.tag();
      if (field === 1 && wire === WIRE_LEN) readResourceSpans(reader.sub(), resourceIndex++, spans);
      else reader.skip(wire);
    }
  } catch (err) {
    if (err instanceof WireError) throw new OtlpDecodeError(`malformed OTLP protobuf body: ${err.message}`);
    throw err;
  }
  return spans;
}

function readResourceSpans(reader: WireReader, resourceIndex: number, out: OtlpSpan[]): void {
  let resource: AttrMap = {};
  const scopes: WireReader[] = [];
  while (!reader.done()) {
    const [field, wire] = reader.tag();
    if (field === 1 && wire === WIRE_LEN) resource = readResource(reader.sub());
    else if (field === 2 && wire === WIRE_LEN) scopes.push(reader.sub());
    else reader.skip(wire);
  }
  // The resource may follow its scopes on the wire; spans need it, so scopes are read afterwards.
  scopes.forEach((scope, scopeIndex) => readScopeSpans(scope, resource, resourceIndex, scopeIndex, out));
}

function readResource(reader: WireReader): AttrMap {
  const attributes: AttrMap = {};
  while (!reader.done()) {
    const [field, wire] = reader.tag();
    if (field === 1 && wire === WIRE_LEN) readKeyValue(reader.sub(), attributes);
    else reader.skip(wire);
  }
  return attributes;
}

function readScopeSpans(reader: WireReader, resource: AttrMap, resourceIndex: number, scopeIndex: number, out: OtlpSpan[]): void {
  const scope = { name: "", version: "" };
  const spanReaders: WireReader[] = [];
  while (!reader.done()) {
    const [field, wire] = reader.tag();
    if (field === 1 && wire === WIRE_LEN) {
      const sub = reader.sub();
      while (!sub.done()) {
        const [f, w] = sub.tag();
        if (f === 1 && w === WIRE_LEN) scope.name = sub.string();
        else if (f === 2 && w === WIRE_LEN) scope.version = sub.string();
        else sub.skip(w);
      }
    } else if (field === 2 && wire === WIRE_LEN) spanReaders.push(reader.sub());
    else reader.skip(wire);
  }
  spanReaders.forEach((spanReader, spanIndex) =>
    out.push(readSpan(spanReader, resource, scope, { resource: resourceIndex, scope: scopeIndex, span: spanIndex })),
  );
}

function readSpan(reader: WireReader, resource: AttrMap, scope: OtlpSpan["scope"], position: OtlpSpan["position"]): OtlpSpan {
  const span: OtlpSpan = {
    resource,
    scope,
    traceId: "",
    spanId: "",
    parentSpanId: "",
    name: "",
    kind: 0,
    startTimeUnixNano: 0n,
    endTimeUnixNano: 0n,
    attributes: {},
    events: [],
    position,
  };
  while (!reader.done()) {
    const [field, wire] = reader.tag();
    if (field === 1 && wire === WIRE_LEN) span.traceId = toHex(reader.bytes());
    else if (field === 2 && wire === WIRE_LEN) span.spanId = toHex(reader.bytes());
    else if (field === 4 && wire === WIRE_LEN) span.parentSpanId = toHex(reader.bytes());
    else if (field === 5 && wire === WIRE_LEN) span.name = reader.string();
    else if (field === 6 && wire === WIRE_VARINT) span.kind = reader.varint();
    else if (field === 7 && wire === WIRE_FIXED64) span.startTimeUnixNano = reader.fixed64();
    else if (field === 8 && wire === WIRE_FIXED64) span.endTimeUnixNano = reader.fixed64();
    else if (field === 9 && wire === WIRE_LEN) readKeyValue(reader.sub(), span.attributes);
    else if (field === 11 && wire === WIRE_LEN) span.events.push(readEvent(reader.sub()));
    else reader.skip(wire);
  }
  return span;
}

function readEvent(reader: WireReader): OtlpEvent {
  const event: OtlpEvent = { timeUnixNano: 0n, name: "", attributes: {} };
  while (!reader.done()) {
    const [field, wire] = reader.tag();
    if (field === 1 && wire === WIRE_FIXED64) event.timeUnixNano = reader.fixed64();
    else if (field === 2 && wire === WIRE_LEN) event.name = reader.string();
    else if (field === 3 && wire === WIRE_LEN) readKeyValue(reader.sub(), event.attributes);
    else reader.skip(wire);
  }
  return event;
}

function readKeyValue(reader: WireReader, into: AttrMap): void {
  let key = "";
  let value: AttrValue = null;
  while (!reader.done()) {
    const [field, wire] = reader.tag();
    if (field === 1 && wire === WIRE_LEN) key = reader.string();
    else if (field === 2 && wire === WIRE_LEN) value = readAnyValue(reader.sub());
    else reader.skip(wire);
  }
  into[key] = value;
}

function readAnyValue(reader: WireReader): AttrValue {
  let value: AttrValue = null;
  while (!reader.done()) {
    const [field, wire] = reader.tag();
    if (field === 1 && wire === WIRE_LEN) value = reader.string();
    else if (field === 2 && wire === WIRE_VARINT) value = reader.varint() !== 0;
    else if (field === 3 && wire === WIRE_VARINT) value = intValue(reader.int64());
    else if (field === 4 && wire === WIRE_FIXED64) value = reader.double();
    else if (field === 5 && wire === WIRE_LEN) {
      const sub = reader.sub();
      const values: AttrValue[] = [];
      while (!sub.done()) {
        const [f, w] = sub.tag();
        if (f === 1 && w === WIRE_LEN) values.push(readAnyValue(sub.sub()));
        else sub.skip(w);
      }
      value = values;
    } else if (field === 6 && wire === WIRE_LEN) {
      const sub = reader.sub();
      const map: AttrMap = {};
      while (!sub.done()) {
        const [f, w] = sub.tag();
        if (f === 1 && w === WIRE_LEN) readKeyValue(sub.sub(), map);
        else sub.skip(w);
      }
      value = map;
    } else if (field === 7 && wire === WIRE_LEN) value = Buffer.from(reader.bytes()).toString("base64");
    else reader.skip(wire);
  }
  return value;
}

/** int64 attribute values stay numbers when exact, strings otherwise. */
function intValue(value: bigint): number | string {
  return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : value.toString();
}

function toHex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("hex");
}

// ---- JSON -----------------------------------------------------------------------------------------------
// OTLP JSON is the protobuf JSON mapping with two deviations: trace/span ids are hex, and enums are ints.
// Parsers must accept both lowerCamelCase and original snake_case field names; we also accept enum names.

type Json = string | number | boolean | null | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

function parseJsonBody(bytes: Uint8Array): unknown {
  try {
    return JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (err) {
    throw new OtlpDecodeError(`malformed OTLP JSON body: ${(err as Error).message}`);
  }
}

/** The spans of an OTLP JSON ExportTraceServiceRequest, given as the parsed JSON value. */
export function decodeJsonTraceRequest(root: unknown): OtlpSpan[] {
  const request = asObject(root as Json, "request");
  const spans: OtlpSpan[] = [];
  asArray(field(request, "resourceSpans", "resource_spans"), "resourceSpans").forEach((rsJson, resourceIndex) => {
    const rs = asObject(rsJson, `resourceSpans[${resourceIndex}]`);
    const resourceJson = field(rs, "resource");
    const resource = resourceJson == null ? {} : jsonAttributes(field(asObject(resourceJson, "resource"), "attributes"));
    asArray(field(rs, "scopeSpans", "scope_spans"), "scopeSpans").forEach((ssJson, scopeIndex) => {
      const ss = asObject(ssJson, "scopeSpans[]");
      const scopeJson = field(ss, "scope");
      const scopeObject = scopeJson == null ? {} : asObject(scopeJson, "scope");
      const scope = { name: asString(field(scopeObject, "name"), "scope.name"), version: asString(field(scopeObject, "version"), "scope.version") };
      asArray(field(ss, "spans"), "spans").forEach((spanJson, spanIndex) => {
        spans.push(jsonSpan(asObject(spanJson, "span"), resource, scope, { resource: resourceIndex, scope: scopeIndex, span: spanIndex }));
      });
    });
  });
  return spans;
}

const SPAN_KINDS = ["SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER", "SPAN_KIND_CLIENT", "SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER"];

function jsonSpan(span: JsonObject, resource: AttrMap, scope: OtlpSpan["scope"], position: OtlpSpan["position"]): OtlpSpan {
  const kindJson = field(span, "kind");
  let kind = 0;
  if (typeof kindJson === "string" && SPAN_KINDS.includes(kindJson)) kind = SPAN_KINDS.indexOf(kindJson);
  else if (kindJson != null) kind = Number(asInt(kindJson, "kind"));
  return {
    resource,
    scope,
    traceId: jsonId(field(span, "traceId", "trace_id"), "traceId"),
    spanId: jsonId(field(span, "spanId", "span_id"), "spanId"),
    parentSpanId: jsonId(field(span, "parentSpanId", "parent_span_id"), "parentSpanId"),
    name: asString(field(span, "name"), "name"),
    kind,
    startTimeUnixNano: asInt(field(span, "startTimeUnixNano", "start_time_unix_nano"), "startTimeUnixNano"),
    endTimeUnixNano: asInt(field(span, "endTimeUnixNano", "end_time_unix_nano"), "endTimeUnixNano"),
    attributes: jsonAttributes(field(span, "attributes")),
    events: asArray(field(span, "events"), "events").map((eventJson) => {
      const event = asObject(eventJson, "event");
      return {
        timeUnixNano: asInt(field(event, "timeUnixNano", "time_unix_nano"), "timeUnixNano"),
        name: asString(field(event, "name"), "event.name"),
        attributes: jsonAttributes(field(event, "attributes")),
      };
    }),
    position,
  };
}

/** Ids are hex in OTLP JSON; anything that is not hex is kept as-is so that ingestion rejects that one span. */
function jsonId(value: Json | undefined, what: string): string {
  if (value == null) return "";
  return asString(value, what).toLowerCase();
}

function jsonAttributes(value: Json | undefined): AttrMap {
  const map: AttrMap = {};
  for (const kvJson of asArray(value, "attributes")) {
    const kv = asObject(kvJson, "attribute");
    const valueJson = field(kv, "value");
    map[asString(field(kv, "key"), "attribute key")] = valueJson == null ? null : jsonAnyValue(asObject(valueJson, "AnyValue"));
  }
  return map;
}

function jsonAnyValue(value: JsonObject): AttrValue {
  const str = field(value, "stringValue", "string_value");
  if (str !== undefined) return asString(str, "stringValue");
  const bool = field(value, "boolValue", "bool_value");
  if (bool !== undefined) {
    if (typeof bool !== "boolean") throw new OtlpDecodeError("malformed OTLP JSON body: boolValue must be a boolean");
    return bool;
  }
  const int = field(value, "intValue", "int_value");
  if (int !== undefined) return intValue(asInt(int, "intValue"));
  const double = field(value, "doubleValue", "double_value");
  if (double !== undefined) {
    // The JSON mapping spells non-finite doubles as strings.
    if (typeof double === "number") return double;
    if (typeof double === "string" && ["NaN", "Infinity", "-Infinity"].includes(double)) return Number(double);
    throw new OtlpDecodeError("malformed OTLP JSON body: doubleValue must be a number");
  }
  const array = field(value, "arrayValue", "array_value");
  if (array !== undefined) {
    const values = array == null ? [] : asArray(field(asObject(array, "arrayValue"), "values"), "arrayValue.values");
    return values.map((item) => (item == null ? null : jsonAnyValue(asObject(item, "AnyValue"))));
  }
  const kvlist = field(value, "kvlistValue", "kvlist_value");
  if (kvlist !== undefined) return kvlist == null ? {} : jsonAttributes(field(asObject(kvlist, "kvlistValue"), "values"));
  const bytes = field(value, "bytesValue", "bytes_value");
  if (bytes !== undefined) return asString(bytes, "bytesValue");
  return null;
}

function field(object: JsonObject, name: string, alternative?: string): Json | undefined {
  if (Object.hasOwn(object, name)) return object[name];
  return alternative !== undefined && Object.hasOwn(object, alternative) ? object[alternative] : undefined;
}

function asObject(value: Json | undefined, what: string): JsonObject {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new OtlpDecodeError(`malformed OTLP JSON body: ${what} must be an object`);
  }
  return value;
}

function asArray(value: Json | undefined, what: string): Json[] {
  if (value == null) return [];
  if (!Array.isArray(value)) throw new OtlpDecodeError(`malformed OTLP JSON body: ${what} must be an array`);
  return value;
}

function asString(value: Json | undefined, what: string): string {
  if (value == null) return "";
  if (typeof value !== "string") throw new OtlpDecodeError(`malformed OTLP JSON body: ${what} must be a string`);
  return value;
}

/** int64/fixed64 fields: JSON numbers or decimal strings. */
function asInt(value: Json | undefined, what: string): bigint {
  if (value == null) return 0n;
  if (typeof value === "number" && Number.isInteger(value)) return BigInt(value);
  if (typeof value === "string" && /^-?\d+$/.test(value.trim())) return BigInt(value.trim());
  throw new OtlpDecodeError(`malformed OTLP JSON body: ${what} must be an integer`);
}
