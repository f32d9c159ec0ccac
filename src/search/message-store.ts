import type { Knex } from "knex";
import { dialectOf } from "../store/db.js";
import { addConversationWords, addWords, type ConversationWords } from "./conversation-words.js";
import { extractMessages, spanGenAi } from "./extract.js";
import type { AttrMap, OtlpSpan } from "./otlp-types.js";
import { insertRows, rowsOf, type Columns, type ColumnType } from "./rows.js";
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

const SPAN_COLUMNS = [
  ["project", "text"], ["trace_id", "text"], ["span_id", "text"], ["parent_span_id", "text"], ["name", "text"], ["kind", "bigint"],
  ["start_us", "bigint"], ["end_us", "bigint"], ["operation_name", "text"], ["provider_name", "text"], ["request_model", "text"],
  ["response_model", "text"], ["agent_name", "text"], ["conversation_id", "text"], ["conversation_name", "text"],
  ["conversation_key", "text"], ["resource_attributes", "text"], ["attributes", "text"], ["events", "text"],
] as const satisfies readonly (readonly [keyof SpanRow, ColumnType])[];
const MESSAGE_COLUMNS: Columns = [
  ["project", "text"], ["trace_id", "text"], ["span_id", "text"], ["ordinal", "bigint"], ["role", "text"], ["content_id", "bigint"],
  ["conversation_key", "text"], ["agent_name", "text"], ["provider_name", "text"], ["request_model", "text"], ["started_us", "bigint"],
];
const CONVERSATION_COLUMNS: Columns = [
  ["project", "text"], ["conversation_key", "text"], ["conversation_name", "text"], ["name_us", "bigint"], ["name_span", "text"],
  ["agent_name", "text"], ["agent_us", "bigint"], ["agent_span", "text"],
];
const CONTENT_COLUMNS: Columns = [["digest", "text"], ["content", "text"], ["search_text", "text"]];

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
      if (fresh.size === 0) return 0;
      await upsertConversations(trx, ordered.filter(([key]) => fresh.has(key)).map(([, row]) => row));
      const pending = ordered.filter(([key]) => fresh.has(key)).flatMap(([key]) => messages.get(key) ?? []);
      if (pending.length === 0) return 0;
      const texts = new SearchTexts(pending);
      const contentIds = await storeContent(trx, texts);
      const messageRows = pending.map((message) => {
        const span = rows.get(message.spanKey) as SpanRow;
        return [
          span.project,
          span.trace_id,
          span.span_id,
          message.ordinal,
          message.role,
          contentIds.get(message.digest) as number,
          span.conversation_key,
          span.agent_name,
          span.provider_name,
          span.request_model,
          span.start_us,
        ];
      });
      await insertRows(trx, "search_messages", MESSAGE_COLUMNS, messageRows, "");
      await addConversationWords(trx, conversationWords(pending, rows, texts));
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
    attributes: JSON.stringify(withoutPayloads(span.attributes)),
    events: JSON.stringify(span.events, (_key, value: unknown) => (typeof value === "bigint" ? value.toString() : value)),
  };
}

const PAYLOADS = new Set(["gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"]);
const INDEXED_CONTENT = /^gen_ai\.(prompt|completion)\.\d+\.content$/;

/** The span's attributes without the message texts, which search_content already holds once per digest. */
function withoutPayloads(attributes: AttrMap): AttrMap {
  const kept: AttrMap = {};
  for (const [key, value] of Object.entries(attributes)) {
    if (!PAYLOADS.has(key) && !INDEXED_CONTENT.test(key)) kept[key] = value;
  }
  return kept;
}

/** Inserts the spans not stored yet; returns the keys of those this transaction inserted. */
async function insertNewSpans(trx: Knex.Transaction, rows: SpanRow[]): Promise<Set<string>> {
  const inserted = await insertRows<{ project: string; trace_id: string; span_id: string }>(
    trx,
    "search_spans",
    SPAN_COLUMNS,
    rows.map((row) => SPAN_COLUMNS.map(([column]) => row[column])),
    "ON CONFLICT (project, trace_id, span_id) DO NOTHING RETURNING project, trace_id, span_id",
  );
  return new Set(inserted.map((row) => `${row.project}\u0000${row.trace_id}\u0000${row.span_id}`));
}

/**
 * Keeps each conversation's newest non-empty name and agent: the batch's newest first (one row per
 * conversation, as one statement may touch a row only once), then the stored one where it is newer.
 */
async function upsertConversations(trx: Knex.Transaction, spans: SpanRow[]): Promise<void> {
  interface Newest { value: string; us: number; span: string }
  const newer = (candidate: Newest, current: Newest) => candidate.us > current.us || (candidate.us === current.us && candidate.span > current.span);
  const batch = new Map<string, { project: string; key: string; name: Newest; agent: Newest }>();
  for (const span of spans) {
    const id = `${span.project}\u0000${span.conversation_key}`;
    const entry = batch.get(id) ?? { project: span.project, key: span.conversation_key, name: { value: "", us: -1, span: "" }, agent: { value: "", us: -1, span: "" } };
    batch.set(id, entry);
    const at = { us: span.start_us, span: span.span_id };
    if (span.conversation_name !== "" && newer({ value: span.conversation_name, ...at }, entry.name)) entry.name = { value: span.conversation_name, ...at };
    if (span.agent_name !== "" && newer({ value: span.agent_name, ...at }, entry.agent)) entry.agent = { value: span.agent_name, ...at };
  }
  const rows = [...batch.values()]
    .sort((a, b) => (a.project + "\u0000" + a.key < b.project + "\u0000" + b.key ? -1 : 1))
    .map((c) => [c.project, c.key, c.name.value, c.name.us, c.name.span, c.agent.value, c.agent.us, c.agent.span]);
  const newest = (value: string, us: string, span: string) => {
    const wins = `(excluded.${us} > search_conversations.${us} OR (excluded.${us} = search_conversations.${us} AND excluded.${span} > search_conversations.${span}))`;
    return [value, us, span].map((column) => `${column} = CASE WHEN ${wins} THEN excluded.${column} ELSE search_conversations.${column} END`).join(", ");
  };
  await insertRows(
    trx,
    "search_conversations",
    CONVERSATION_COLUMNS,
    rows,
    `ON CONFLICT (project, conversation_key) DO UPDATE SET ${newest("conversation_name", "name_us", "name_span")}, ${newest("agent_name", "agent_us", "agent_span")}`,
  );
}

/** Stores each distinct content once; returns the id of every digest the messages need. */
async function storeContent(trx: Knex.Transaction, texts: SearchTexts): Promise<Map<string, number>> {
  const digests = texts.digests().sort();
  const ids = new Map<string, number>();
  const lookUp = async (wanted: string[]) => {
    const known = await trx.raw<unknown>(
      dialectOf(trx) === "sqlite"
        ? "SELECT id, digest FROM search_content WHERE digest IN (SELECT value FROM json_each(?))"
        : "SELECT id, digest FROM search_content WHERE digest IN (SELECT json_array_elements_text(?::json))",
      [JSON.stringify(wanted)],
    );
    for (const row of rowsOf<{ id: number | string; digest: string }>(known)) ids.set(row.digest, Number(row.id));
  };
  // Repeated contents (system prompts, resent history) are the common case: look them up before computing
  // and sending their word strings.
  await lookUp(digests);
  const missing = digests.filter((digest) => !ids.has(digest));
  if (missing.length === 0) return ids;
  const inserted = await insertRows<{ id: number | string; digest: string }>(
    trx,
    "search_content",
    CONTENT_COLUMNS,
    missing.map((digest) => [digest, texts.content(digest), texts.of(digest)]),
    "ON CONFLICT (digest) DO NOTHING RETURNING id, digest",
  );
  for (const row of inserted) ids.set(row.digest, Number(row.id));
  // Another writer inserted these between our read and our insert; read their ids.
  const raced = missing.filter((digest) => !ids.has(digest));
  if (raced.length > 0) await lookUp(raced);
  return ids;
}

/** The distinct contents of a batch by digest, and their word strings, computed once per digest. */
class SearchTexts {
  private readonly contents = new Map<string, string>();
  private readonly texts = new Map<string, string>();

  constructor(pending: PendingMessage[]) {
    for (const message of pending) this.contents.set(message.digest, message.content);
  }

  digests(): string[] {
    return [...this.contents.keys()];
  }

  content(digest: string): string {
    return this.contents.get(digest) as string;
  }

  of(digest: string): string {
    let text = this.texts.get(digest);
    if (text === undefined) {
      text = searchText(this.contents.get(digest) as string);
      this.texts.set(digest, text);
    }
    return text;
  }
}

/** The words of the new messages, per conversation. */
function conversationWords(pending: PendingMessage[], spans: Map<string, SpanRow>, texts: SearchTexts): ConversationWords[] {
  const conversations = new Map<string, ConversationWords & { digests: Set<string> }>();
  for (const message of pending) {
    const span = spans.get(message.spanKey) as SpanRow;
    const key = `${span.project}\u0000${span.conversation_key}`;
    const entry = conversations.get(key) ?? { project: span.project, conversationKey: span.conversation_key, words: new Set<string>(), digests: new Set<string>() };
    conversations.set(key, entry);
    if (entry.digests.has(message.digest)) continue;
    entry.digests.add(message.digest);
    addWords(entry.words, texts.of(message.digest));
  }
  return [...conversations.values()];
}
