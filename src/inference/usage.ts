import type { Knex } from "knex";
import type { components } from "../../generated/inference.js";
import type { Principal } from "../auth/keys.js";

export interface UsageRecord {
  principal: Principal;
  /** The project the request was attributed to, or undefined when none was named. */
  project?: string;
  model: string;
  promptTokens: number;
  completionTokens: number;
}

export async function recordUsage(db: Knex, u: UsageRecord): Promise<void> {
  await db("usage").insert({
    key_id: u.principal.keyId,
    entity: u.principal.entity,
    project: u.project ?? "",
    model: u.model,
    prompt_tokens: u.promptTokens,
    completion_tokens: u.completionTokens,
    created_at: new Date(),
  });
}

export type UsageTotal = components["schemas"]["UsageTotal"];

/** Totals of the key's entity by project and model; `since` inclusive, `until` exclusive. */
export async function usageTotals(db: Knex, principal: Principal, filter: { project?: string; model?: string; since?: Date; until?: Date }): Promise<UsageTotal[]> {
  let q = db("usage").where({ entity: principal.entity });
  if (filter.project !== undefined) q = q.where({ project: filter.project });
  if (filter.model) q = q.where({ model: filter.model });
  if (filter.since) q = q.where("created_at", ">=", filter.since);
  if (filter.until) q = q.where("created_at", "<", filter.until);
  const rows: { project: string; model: string; requests: string | number; prompt: string | number; completion: string | number }[] = await q
    .groupBy("project", "model")
    .orderBy([{ column: "project" }, { column: "model" }])
    .select("project", "model")
    .count({ requests: "*" })
    .sum({ prompt: "prompt_tokens", completion: "completion_tokens" });
  return rows.map((r) => ({
    project: `${principal.entity}/${r.project}`,
    model: r.model,
    requests: Number(r.requests),
    prompt_tokens: Number(r.prompt),
    completion_tokens: Number(r.completion),
    total_tokens: Number(r.prompt) + Number(r.completion),
  }));
}

/** Tokens the entity used since the start of the current calendar month (UTC). */
export async function tokensThisMonth(db: Knex, entity: string, now = new Date()): Promise<number> {
  const monthStart = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  const [row] = await db("usage").where({ entity }).where("created_at", ">=", monthStart).sum({ p: "prompt_tokens", c: "completion_tokens" });
  return Number(row?.p ?? 0) + Number(row?.c ?? 0);
}
