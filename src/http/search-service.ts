import path from "node:path";
import type { AppContext } from "../app-context.js";
import type { Principal } from "../auth/keys.js";
import { authorizeProject, ensureProject, parseProjectId } from "../auth/projects.js";
import { AppError, invalid } from "../errors.js";
import { SPEC_DIR } from "../paths.js";
import {
  decodeJsonTraceRequest,
  decodeProtobufTraceRequest,
  encodeTraceResponse,
  ingestSpans,
  OtlpDecodeError,
  projectsOf,
  searchMessages,
  SearchRequestError,
  type AgentSearchReq,
} from "../search/index.js";
import { healthHandler, metricsHandler } from "./operations-handlers.js";
import type { OperationHandler, ServiceDefinition } from "./service-app.js";

/** Search's own errors carry what went wrong; this says which status each one is. */
async function asAppErrors<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof SearchRequestError) throw invalid(err.message, err.loc, err.type);
    if (err instanceof OtlpDecodeError) {
      const kind = err.kind === "too_large" ? "too_large" : err.kind === "unsupported_media_type" ? "unsupported_media_type" : "unsupported";
      throw new AppError(kind, err.message, undefined, "bad_otlp");
    }
    throw err;
  }
}

export function searchService(ctx: AppContext): ServiceDefinition {
  const { db } = ctx;

  /** Every project the spans name must belong to the key's entity; otherwise nothing is stored. */
  async function authorizeSpanProjects(principal: Principal, projects: string[], fromHeader: boolean): Promise<void> {
    for (const id of projects) {
      const ref = authorizeProject(principal, parseProjectId(id, fromHeader ? ["header", "project_id"] : ["body", "resourceSpans"]));
      await ensureProject(db, ref);
    }
  }

  const ingest: OperationHandler = ({ principal, body, headers }) =>
    asAppErrors(async () => {
      const protobuf = Buffer.isBuffer(body);
      const spans = protobuf ? decodeProtobufTraceRequest(body) : decodeJsonTraceRequest(body);
      const headerProject = typeof headers["project_id"] === "string" ? headers["project_id"] : undefined;
      const projects = projectsOf(spans, headerProject);
      await authorizeSpanProjects(principal, headerProject ? [headerProject, ...projects] : projects, headerProject !== undefined);
      const result = await ingestSpans(db, spans, { project: headerProject });
      const encoded = encodeTraceResponse(result, protobuf ? "protobuf" : "json");
      return { body: protobuf ? Buffer.from(encoded.body) : JSON.parse(Buffer.from(encoded.body).toString("utf8")), contentType: encoded.contentType };
    });

  return {
    name: "search",
    specPath: path.join(SPEC_DIR, "search.yaml"),
    errorStyle: "detail",
    handlers: {
      searchAgentMessages: ({ principal, body }) =>
        asAppErrors(async () => {
          const request = body as AgentSearchReq;
          authorizeProject(principal, parseProjectId(request.project_id, ["body", "project_id"]));
          return { body: await searchMessages(db, request) };
        }),
      ingestTraces: ingest,
      ingestTracesAtRoot: ingest,
      getSearchHealth: healthHandler("search", db),
      getSearchMetrics: metricsHandler,
    },
  };
}
