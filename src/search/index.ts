/** Message search: what the HTTP handlers and the CLI call. */
export { decodeTraceRequest, decodeProtobufTraceRequest, decodeJsonTraceRequest, otlpEncodingOf, type DecodeOptions, type DecodedTraces } from "./otlp-decode.js";
export { encodeTraceResponse, type EncodedResponse } from "./otlp-response.js";
export { OtlpDecodeError, type OtlpSpan, type OtlpEncoding } from "./otlp-types.js";
export { ingestSpans, projectOf, projectsOf, isProjectId, type IngestOptions, type IngestResult } from "./message-store.js";
export {
  searchMessages,
  SEARCH_ROLES,
  MAX_LIMIT,
  type AgentSearchReq,
  type AgentSearchRes,
  type AgentSearchConversationResult,
  type AgentSearchMatchedMessage,
  type SearchRole,
} from "./search.js";
export { parseQuery, QueryError, type ParsedQuery } from "./query.js";
export { SearchRequestError } from "./errors.js";
