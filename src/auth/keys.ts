import { createHash, randomBytes } from "node:crypto";
import type { Knex } from "knex";
import { toIso } from "../store/values.js";

/** Who a request acts as, once its API key is verified. */
export interface Principal {
  keyId: string;
  entity: string;
}

export interface ApiKeyInfo {
  id: string;
  entity: string;
  label: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

const KEY_PREFIX = "gyre_";
// last_used_at is bookkeeping, not an audit log: writing it on every request would turn reads into writes.
const LAST_USED_RESOLUTION_MS = 60_000;

/** Keys are 256 random bits, so a fast hash is enough: there is nothing to brute-force. */
export function hashApiKey(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("hex");
}

export function isWellFormedEntity(name: string): boolean {
  return /^[A-Za-z0-9_.-]{1,100}$/.test(name);
}

export async function ensureEntity(db: Knex, entity: string): Promise<void> {
  if (!isWellFormedEntity(entity)) throw new Error(`Invalid entity name '${entity}': use letters, digits, '_', '.', '-'.`);
  await db("entities").insert({ name: entity, created_at: new Date() }).onConflict("name").ignore();
}

/** Creates a key for `entity`; the key itself is returned once and only its hash is kept. */
export async function createApiKey(db: Knex, entity: string, label = ""): Promise<{ id: string; key: string }> {
  return registerApiKey(db, entity, KEY_PREFIX + randomBytes(32).toString("base64url"), label);
}

/** Stores a key chosen by the operator (`GYRE_API_KEY`); registering the same key again changes nothing. */
export async function registerApiKey(db: Knex, entity: string, key: string, label = ""): Promise<{ id: string; key: string }> {
  await ensureEntity(db, entity);
  const hash = hashApiKey(key);
  const existing = await db("api_keys").where({ hash }).first("id", "entity");
  if (existing) {
    if (existing.entity !== entity) throw new Error(`That key is already registered for entity '${existing.entity}'.`);
    return { id: existing.id, key };
  }
  const id = "key_" + randomBytes(8).toString("hex");
  await db("api_keys").insert({ id, entity, hash, label, created_at: new Date() });
  return { id, key };
}

export async function verifyApiKey(db: Knex, key: string): Promise<Principal | null> {
  if (!key) return null;
  const row = await db("api_keys").where({ hash: hashApiKey(key) }).whereNull("revoked_at").first("id", "entity", "last_used_at");
  if (!row) return null;
  const lastUsed = row.last_used_at ? new Date(row.last_used_at).getTime() : 0;
  if (Date.now() - lastUsed > LAST_USED_RESOLUTION_MS) {
    await db("api_keys").where({ id: row.id }).update({ last_used_at: new Date() });
  }
  return { keyId: row.id, entity: row.entity };
}

export async function listApiKeys(db: Knex): Promise<ApiKeyInfo[]> {
  const rows = await db("api_keys").orderBy("created_at").select("id", "entity", "label", "created_at", "last_used_at", "revoked_at");
  return rows.map((r) => ({
    id: r.id,
    entity: r.entity,
    label: r.label,
    created_at: toIso(r.created_at),
    last_used_at: r.last_used_at ? toIso(r.last_used_at) : null,
    revoked_at: r.revoked_at ? toIso(r.revoked_at) : null,
  }));
}

export async function revokeApiKey(db: Knex, id: string): Promise<boolean> {
  const n = await db("api_keys").where({ id }).whereNull("revoked_at").update({ revoked_at: new Date() });
  return n > 0;
}

export async function countActiveApiKeys(db: Knex): Promise<number> {
  const [{ n }] = await db("api_keys").whereNull("revoked_at").count({ n: "*" });
  return Number(n);
}
