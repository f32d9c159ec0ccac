import { WireWriter } from "./protobuf-wire.js";
import type { OtlpEncoding } from "./otlp-types.js";

export interface EncodedResponse {
  contentType: string;
  body: Uint8Array;
}

/**
 * ExportTraceServiceResponse in the request's encoding. `partial_success` is set only when spans were
 * rejected: OTLP tells clients that an absent or empty partial_success means full success.
 */
export function encodeTraceResponse(result: { rejected: number; errorMessage: string }, encoding: OtlpEncoding): EncodedResponse {
  if (encoding === "json") {
    const body =
      result.rejected > 0 || result.errorMessage !== ""
        ? // int64 is a decimal string in the protobuf JSON mapping.
          { partialSuccess: { rejectedSpans: String(result.rejected), errorMessage: result.errorMessage } }
        : {};
    return { contentType: "application/json", body: new TextEncoder().encode(JSON.stringify(body)) };
  }
  const response = new WireWriter();
  if (result.rejected > 0 || result.errorMessage !== "") {
    const partial = new WireWriter();
    if (result.rejected > 0) partial.varintField(1, result.rejected);
    if (result.errorMessage !== "") partial.stringField(2, result.errorMessage);
    response.messageField(1, partial);
  }
  return { contentType: "application/x-protobuf", body: response.finish() };
}
