import type { IncomingHttpHeaders } from "node:http";
import { setMaxListeners } from "node:events";
import { Readable } from "node:stream";
import Koa from "koa";
import type { Knex } from "knex";
import { OpenAPIBackend, type Context as OperationContext, type Request as OpenApiRequest } from "openapi-backend";
import addFormats from "ajv-formats";
import type { ErrorObject } from "ajv";
import { AppError } from "../errors.js";
import { verifyApiKey, type Principal } from "../auth/keys.js";
import type { Logger } from "../logging.js";
import { appErrorReply, plainReply, validationReply, type ErrorReply, type ErrorStyle } from "./error-shapes.js";
import { readRequestBody } from "./request-body.js";
import { toValidationIssues } from "./validation-errors.js";
import { httpDuration, httpRequests } from "./metrics.js";

/** What a handler gets: input already validated against the spec, and who is asking. */
export interface OperationInput {
  body: unknown;
  query: Record<string, unknown>;
  params: Record<string, string>;
  headers: IncomingHttpHeaders;
  principal: Principal;
  /** Aborted when the client goes away before the answer is complete. */
  signal: AbortSignal;
}

export interface OperationOutput {
  status?: number;
  body?: unknown;
  contentType?: string;
  headers?: Record<string, string>;
  /** A streamed answer (server-sent events); takes the place of `body`. */
  stream?: AsyncIterable<string>;
}

export type OperationHandler = (input: OperationInput) => Promise<OperationOutput>;

export interface ServiceDefinition {
  name: string;
  specPath: string;
  errorStyle: ErrorStyle;
  /** One handler per operationId of the spec: no more, no less. */
  handlers: Record<string, OperationHandler>;
}

export interface ServiceLimits {
  bodyBytes: number;
  concurrentRequests: number;
  /** Check each JSON answer against the spec before sending it. */
  validateResponses?: boolean;
}

interface Deps {
  db: Knex;
  logger: Logger;
  limits: ServiceLimits;
}

/** Builds the Koa app of one service: routing, auth, body limits and validation come from its OpenAPI spec. */
export async function createServiceApp(def: ServiceDefinition, deps: Deps): Promise<Koa> {
  const api = await loadApi(def);
  const app = new Koa();
  app.proxy = false;
  app.silent = true;
  app.on("error", (err: Error & { code?: string }) => {
    // A client that leaves mid-stream is not a server fault; its generation was already cancelled.
    if (err.code === "ERR_STREAM_PREMATURE_CLOSE" || err.code === "ECONNRESET" || err.code === "EPIPE") return;
    deps.logger.error({ service: def.name, err: { message: err.message, code: err.code } }, "response failed");
  });
  let inFlight = 0;

  app.use(async (ctx) => {
    const started = process.hrtime.bigint();
    let operationId = "unmatched";
    let declared: string[] | undefined;
    inFlight++;
    try {
      if (inFlight > deps.limits.concurrentRequests) {
        return reply(ctx, plainReply(def.errorStyle, 429, "Too many concurrent requests; retry later.", "concurrency_limit"));
      }
      const request: OpenApiRequest = { method: ctx.method, path: ctx.path, query: ctx.query as Record<string, string>, headers: ctx.headers as Record<string, string> };
      const operation = api.router.matchOperation(request);
      if (!operation) {
        const routed = (await api.handleRequest(request)) as ErrorReply;
        return reply(ctx, routed);
      }
      operationId = operation.operationId ?? "unknown";
      declared = Object.keys(operation.responses ?? {});
      const principal = await authenticate(deps.db, ctx.get("authorization"));
      if (!principal) return reply(ctx, plainReply(def.errorStyle, 401, "Missing or invalid API key.", "invalid_api_key"));
      const content = operation.requestBody && "content" in operation.requestBody ? Object.keys(operation.requestBody.content ?? {}) : [];
      if (content.length > 0) {
        request.body = (await readRequestBody(ctx.req, content, deps.limits.bodyBytes)).value;
      }
      const output = (await api.handleRequest(request, { principal, signal: abortSignalOf(ctx) })) as OperationOutput | ErrorReply;
      if (deps.limits.validateResponses) assertConforms(api, operation, output);
      return respond(ctx, output);
    } catch (err) {
      if (err instanceof AppError) {
        const answer = appErrorReply(def.errorStyle, err);
        if (!deps.limits.validateResponses || !declared || declared.includes(String(answer.status))) return reply(ctx, answer);
        deps.logger.error({ service: def.name, operation: operationId, status: answer.status }, "error status not declared in the spec");
        return reply(ctx, plainReply(def.errorStyle, 500, `Status ${answer.status} is not declared for ${operationId}: ${err.message}`, null));
      }
      deps.logger.error({ service: def.name, operation: operationId, err: { message: (err as Error).message, stack: (err as Error).stack } }, "request failed");
      return reply(ctx, plainReply(def.errorStyle, 500, "Internal server error.", null));
    } finally {
      inFlight--;
      // A request refused before its body was read would leave those bytes on a keep-alive socket.
      if (!ctx.req.complete) ctx.set("Connection", "close");
      // Measured when the answer is done, so a streamed completion counts its whole stream.
      finished(ctx, () => {
        const seconds = Number(process.hrtime.bigint() - started) / 1e9;
        httpRequests.inc({ service: def.name, operation: operationId, status: String(ctx.status) });
        httpDuration.observe({ service: def.name, operation: operationId }, seconds);
        deps.logger.info({ service: def.name, method: ctx.method, path: ctx.path, operation: operationId, status: ctx.status, ms: Math.round(seconds * 1000) }, "request");
      });
    }
  });
  return app;
}

async function loadApi(def: ServiceDefinition): Promise<OpenAPIBackend> {
  const api = new OpenAPIBackend({
    definition: def.specPath,
    // `quick` skips openapi-backend's own OpenAPI 3.0 check of the document; the specs are linted as 3.1 instead.
    quick: true,
    validate: true,
    coerceTypes: true,
    ajvOpts: { allErrors: true, useDefaults: true, strict: false },
    customizeAjv: (ajv) => {
      addFormats.default(ajv);
      return ajv;
    },
  });
  const { errorStyle } = def;
  api.register({
    notFound: (c: OperationContext): ErrorReply => plainReply(errorStyle, 404, `No route for ${c.request.method.toUpperCase()} ${c.request.path}.`, "not_found"),
    methodNotAllowed: (c: OperationContext): ErrorReply =>
      plainReply(errorStyle, 405, `Method ${c.request.method.toUpperCase()} is not allowed on ${c.request.path}.`, "method_not_allowed"),
    validationFail: (c: OperationContext): ErrorReply => validationReply(errorStyle, toValidationIssues((c.validation.errors ?? []) as ErrorObject[])),
  });
  // The key was verified before the body was read; the spec's security requirement is met by that principal.
  api.registerSecurityHandler("bearerAuth", (_c: OperationContext, extra?: { principal?: Principal }) => Boolean(extra?.principal));
  api.register("unauthorizedHandler", (): ErrorReply => plainReply(errorStyle, 401, "Missing or invalid API key.", "invalid_api_key"));
  await api.init();
  const operationIds = api.getOperations().map((o) => o.operationId ?? "");
  const missing = operationIds.filter((id) => !def.handlers[id]);
  const unknown = Object.keys(def.handlers).filter((id) => !operationIds.includes(id));
  if (missing.length || unknown.length) {
    throw new Error(`${def.name}: handlers do not match the spec (missing: ${missing.join(", ") || "none"}; unknown: ${unknown.join(", ") || "none"})`);
  }
  for (const [operationId, handler] of Object.entries(def.handlers)) {
    api.register(operationId, (c: OperationContext, extra: { principal: Principal; signal: AbortSignal }) =>
      handler({
        body: c.request.requestBody,
        query: (c.validation.coerced?.query as Record<string, unknown>) ?? c.request.query,
        params: c.request.params as Record<string, string>,
        headers: c.request.headers as IncomingHttpHeaders,
        principal: extra.principal,
        signal: extra.signal,
      }),
    );
  }
  return api;
}

async function authenticate(db: Knex, header: string): Promise<Principal | null> {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match ? verifyApiKey(db, match[1]) : null;
}

function abortSignalOf(ctx: Koa.Context): AbortSignal {
  const controller = new AbortController();
  // Each choice of an `n > 1` completion listens to the same request signal.
  setMaxListeners(64, controller.signal);
  ctx.res.once("close", () => {
    if (!ctx.res.writableFinished) controller.abort();
  });
  return controller.signal;
}

/** The server's own contract check: an answer the spec does not allow is a bug, and fails loudly. */
function assertConforms(api: OpenAPIBackend, operation: Parameters<OpenAPIBackend["validateResponse"]>[1], output: OperationOutput | ErrorReply): void {
  if ("stream" in output && output.stream) return;
  const status = output.status ?? 200;
  const declared = typeof operation === "object" ? Object.keys(operation.responses ?? {}) : [];
  if (!declared.includes(String(status))) throw new Error(`answer status ${status} is not declared for this operation`);
  if (Buffer.isBuffer(output.body) || typeof output.body === "string") return;
  const result = api.validateResponse(output.body, operation, status);
  if (result.errors?.length) throw new Error(`answer does not match the spec: ${JSON.stringify(result.errors).slice(0, 2000)}`);
}

function respond(ctx: Koa.Context, output: OperationOutput | ErrorReply): void {
  if ("stream" in output && output.stream) {
    ctx.status = output.status ?? 200;
    ctx.set({ "Cache-Control": "no-cache", Connection: "keep-alive", ...output.headers });
    ctx.type = output.contentType ?? "text/event-stream";
    ctx.body = Readable.from(output.stream);
    return;
  }
  ctx.status = output.status ?? 200;
  if ("headers" in output && output.headers && typeof output.headers === "object") ctx.set(output.headers);
  if ("contentType" in output && output.contentType) ctx.type = output.contentType;
  ctx.body = output.body ?? null;
}

function reply(ctx: Koa.Context, r: ErrorReply): void {
  ctx.status = r.status;
  ctx.body = r.body;
}

function finished(ctx: Koa.Context, fn: () => void): void {
  if (ctx.res.writableFinished) return fn();
  ctx.res.once("close", fn);
}
