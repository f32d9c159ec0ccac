import type { Knex } from "knex";
import { extractMessages, spanGenAi } from "./extract.js";
import type { AttrMap, OtlpSpan } from "./otlp-types.js";
import { contentDigest, searchText } from "./text.js";

export interface IngestOptions {
  /** The request's `project_id` header; overrides the resource attributes. */
  project?: string | null;
}

export interface IngestResult {
  /** Spans stored by this request or already stored before (a span sent twice is stored once). */
  accepted: number;
  rejected: number;
  /** Why spans were rejected ("" when none were): the first few reasons, with their positions. */
  errorMessage: string;
  /** Message rows written by this request. */
  messages: number;
}

const PROJECT = /^[A-Za-z0-9_.-]{1,100}\/[A-Za-z0-9_.-]{1,100}$/;

export function isProjectId(value: string): boolean {
  return PROJECT.test(value);
}

/**
 * The project a span belongs to: the header when given, else the resource attributes `gyre.entity` +
 * `gyre.project` (or `gyre.project_id` = `entity/project`), else `wandb.entity` + `wandb.project`.
 */
export function projectOf(resource: AttrMap, headerProject?: string | null): string | null {
  if (headerProject) return headerProject;
  const text = (key: string) => (typeof resource[key] === "string" ? (resource[key] as string) : "");
  if (text("gyre.project_id")) return text("gyre.project_id");
  for (const prefix of ["gyre", "wandb"]) {
    const entity = text(`${prefix}.entity`);
    const project = text(`${prefix}.project`);
    if (entity && project) return `${entity}/${project}`;
  }
  return null;
}

/** Every project the spans of a request would be stored in, for the caller's permission check. */
export function projectsOf(spans: OtlpSpan[], headerProject?: string | null): string[] {
  const projects = new Set<string>();
  for (const span of spans) {
    const project = projectOf(span.resource, headerProject);
    if (project !== null && isProjectId(project)) projects.add(project);
  }
  return [...projects].sort();
}

interface SpanRow {
  project: string;
  trace_id: string;
  span_id: string;
  parent_span_id: string;
  name: string;
  kind: number;
  start_us: number;
  end_us: number;
  operation_name: string;
  provider_name: string;
  request_model: string;
  response_model: string;
  agent_name: string;
  conversation_id: string;
  conversation_name: string;
  conversation_key: string;
  resource_attributes: string;
  attributes: string;
  events: string;
}

interface PendingMessage {
  spanKey: string;
  ordinal: number;
  role: string;
  digest: string;
  content: string;
}

const ZERO_TRACE = "0".repeat(32);
const ZERO_SPAN = "0".repeat(16);
const ROWS_PER_INSERT = 400;

/**
 * Stores the spans of one export request and their messages in one transaction: when this resolves, every
 * accepted span is committed. Spans with an invalid id or no project are rejected (and counted); the others
 * are stored, once per (project, trace_id, span_id) however often they are sent.
 */
export async function ingestSpans(db: Knex, spans: OtlpSpan[], options: IngestOptions = {}): Promise<IngestResult> {
  const reasons: string[] = [];
  let rejected = 0;
  const rows = new Map<string, SpanRow>();
  const messages = new Map<string, PendingMessage[]>();

  for (const span of spans) {
    const problem = invalidSpan(span, options.project);
    if (problem !== null) {
      rejected++;
      if (reasons.length < 5) reasons.push(`span ${span.position.span} of scope ${span.position.scope} of resource ${span.position.resource}: ${problem}`);
      continue;
    }
    const row = spanRow(span, projectOf(span.resource, options.project) as string);
    const key = `${row.project}\u0000${row.trace_id}\u0000${row.span_id}`;
    if (rows.has(key)) continue;
    rows.set(key, row);
    messages.set(
      key,
      extractMessages(span).map((message, ordinal) => ({ spanKey: key, ordinal, role: message.role, digest: contentDigest(message.content), content: message.content })),
    );
  }

  // A stable order keeps concurrent PostgreSQL writers from deadlocking on each other's rows.
  const ordered = [...rows.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  let written = 0;
  if (ordered.length > 0) {
    written = await db.transaction(async (trx) => {
      const fresh = await insertNewSpans(trx, ordered.map(([, row]) => row));
      const pending = ordered.filter(([key]) => fresh.has(key)).flatMap(([key]) => messages.get(key) ?? []);
      if (pending.length === 0) return 0;
      const contentIds = await storeContent(trx, pending);
      const messageRows = pending.map((message) => {
        const span = rows.get(message.spanKey) as SpanRow;
        return {
          project: span.project,
          trace_id: span.trace_id,
          span_id: span.span_id,
          ordinal: message.ordinal,
          role: message.role,
          content_id: contentIds.get(message.digest) as number,
          conversation_key: span.conversation_key,
          agent_name: span.agent_name,
          provider_name: span.provider_name,
          request_model: span.request_model,
          started_us: span.start_us,
        };
      });
      for (let i = 0; i < messageRows.length; i += ROWS_PER_INSERT) {
        await trx("search_messages").insert(messageRows.slice(i, i + ROWS_PER_INSERT));
      }
      return messageRows.length;
    });
  }
  const more = rejected > reasons.length ? `; and ${rejected - reasons.length} more` : "";
  return { accepted: rows.size, rejected, errorMessage: rejected > 0 ? reasons.join("; ") + more : "", messages: written };
}

function invalidSpan(span: OtlpSpan, headerProject: string | null | undefined): string | null {
  if (!/^[0-9a-f]{32}$/.test(span.traceId) || span.traceId === ZERO_TRACE) return "trace_id must be 16 bytes, not all zero";
  if (!/^[0-9a-f]{16}$/.test(span.spanId) || span.spanId === ZERO_SPAN) return "span_id must be 8 bytes, not all zero";
  if (span.parentSpanId !== "" && !/^[0-9a-f]{16}$/.test(span.parentSpanId)) return "parent_span_id must be empty or 8 bytes";
  const project = projectOf(span.resource, headerProject);
  if (project === null) return "no project: send the project_id header, or the resource attributes gyre.entity and gyre.project";
  if (!isProjectId(project)) return `project '${project}' is not of the form entity/project`;
  return null;
}

function spanRow(span: OtlpSpan, project: string): SpanRow {
  const genAi = spanGenAi(span);
  return {
    project,
    trace_id: span.traceId,
    span_id: span.spanId,
    parent_span_id: span.parentSpanId === ZERO_SPAN ? "" : span.parentSpanId,
    name: span.name,
    kind: span.kind,
    start_us: Number(span.startTimeUnixNano / 1000n),
    end_us: Number(span.endTimeUnixNano / 1000n),
    operation_name: genAi.operationName,
    provider_name: genAi.providerName,
    request_model: genAi.requestModel,
    response_model: genAi.responseModel,
    agent_name: genAi.agentName,
    conversation_id: genAi.conversationId,
    conversation_name: genAi.conversationName,
    conversation_key: genAi.conversationId !== "" ? genAi.conversationId : `trace:${span.traceId}`,
    resource_attributes: JSON.stringify(span.resource),
    attributes: JSON.stringify(span.attributes),
    events: JSON.stringify(span.events, (_key, value: unknown) => (typeof value === "bigint" ? value.toString() : value)),
  };
}

/** Inserts the spans not stored yet; returns the keys of those this transaction inserted. */
async function insertNewSpans(trx: Knex.Transaction, rows: SpanRow[]): Promise<Set<string>> {
  const fresh = new Set<string>();
  for (let i = 0; i < rows.length; i += ROWS_PER_INSERT) {
    const inserted: { project: string; trace_id: string; span_id: string }[] = await trx("search_spans")
      .insert(rows.slice(i, i + ROWS_PER_INSERT))
      .onConflict(["project", "trace_id", "span_id"])
      .ignore()
      .returning(["project", "trace_id", "span_id"]);
    for (const row of inserted) fresh.add(`${row.project}\u0000${row.trace_id}\u0000${row.span_id}`);
  }
  return fresh;
}

/** Stores each distinct content once; returns the id of every digest the messages need. */
async function storeContent(trx: Knex.Transaction, pending: PendingMessage[]): Promise<Map<string, number>> {
  const byDigest = new Map<string, string>();
  for (const message of pending) byDigest.set(message.digest, message.content);
  const digests = [...byDigest.keys()].sort();
  const ids = new Map<string, number>();
  for (let i = 0; i < digests.length; i += ROWS_PER_INSERT) {
    const chunk = digests.slice(i, i + ROWS_PER_INSERT);
    const known: { id: number | string; digest: string }[] = await trx("search_content").select("id", "digest").whereIn("digest", chunk);
    for (const row of known) ids.set(row.digest, Number(row.id));
    const missing = chunk.filter((digest) => !ids.has(digest));
    if (missing.length === 0) continue;
    const rows = missing.map((digest) => {
      const content = byDigest.get(digest) as string;
      return { digest, content, search_text: searchText(content) };
    });
    const inserted: { id: number | string; digest: string }[] = await trx("search_content")
      .insert(rows)
      .onConflict("digest")
      .ignore()
      .returning(["id", "digest"]);
    for (const row of inserted) ids.set(row.digest, Number(row.id));
    // Another writer inserted these between our read and our insert; read their ids.
    const raced = missing.filter((digest) => !ids.has(digest));
    if (raced.length > 0) {
      const stored: { id: number | string; digest: string }[] = await trx("search_content").select("id", "digest").whereIn("digest", raced);
      for (const row of stored) ids.set(row.digest, Number(row.id));
    }
  }
  return ids;
}
