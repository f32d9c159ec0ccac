import type { Knex } from "knex";
import { invalid } from "../errors.js";
import { toPage, type Page, type PageQuery } from "../store/paging.js";
import { fromJson, toIso } from "../store/values.js";

export type EventType = "training_started" | "gradient_step" | "training_ended" | "training_failed";

export interface TrainingEvent {
  id: string;
  type: EventType;
  data: Record<string, unknown>;
  created_at: string;
}

/** Event ids are the store's sequence, zero-padded so they also sort as strings. */
const formatId = (seq: number | string) => String(seq).padStart(12, "0");

export async function appendEvent(db: Knex, jobId: string, type: EventType, data: Record<string, unknown>): Promise<void> {
  await db("training_events").insert({ job_id: jobId, type, data: JSON.stringify(data), created_at: new Date() });
}

export async function listEvents(db: Knex, jobId: string, query: PageQuery): Promise<Page<TrainingEvent>> {
  let q = db("training_events").where({ job_id: jobId });
  if (query.after !== undefined) {
    if (!/^\d{1,18}$/.test(query.after)) throw invalid(`'${query.after}' is not an event id.`, ["query", "after"], "unknown_cursor");
    q = q.where("seq", ">", Number(query.after));
  }
  const rows: { seq: number | string; type: EventType; data: string; created_at: unknown }[] = await q.orderBy("seq").limit(query.limit + 1);
  const events = rows.map((r) => ({ id: formatId(r.seq), type: r.type, data: fromJson(r.data, {}), created_at: toIso(r.created_at) }));
  return toPage(events, query.limit, (e) => e.id);
}
