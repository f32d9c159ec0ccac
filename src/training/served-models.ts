import type { Knex } from "knex";
import type { Principal } from "../auth/keys.js";
import { notFound } from "../errors.js";
import { toIso } from "../store/values.js";
import type { BaseModel, ModelRegistry } from "../inference/model-registry.js";
import { checkpointName, findCheckpoint } from "./checkpoints.js";
import { findModelByName } from "./models.js";

export interface ServedModel {
  /** The canonical id answered in `model`: a base model id, or `entity/project/name:stepN`. */
  id: string;
  base: BaseModel;
  /** The checkpoint's LoRA adapter; null for a base model and for step 0. */
  adapterPath: string | null;
}

const CHECKPOINT = /^(?:wandb-artifact:\/\/\/)?([A-Za-z0-9_.-]+)\/([A-Za-z0-9_.-]+)\/([A-Za-z0-9_.-]+?)(?::(?:step(\d+)|latest))?$/;

/**
 * Resolves what a chat request names in `model`: a base model, or a trained checkpoint as
 * `entity/project/name[:stepN]` (the latest step when none is given), also spelled `wandb-artifact:///…`.
 * Checkpoints of other entities are reported as missing.
 */
export async function resolveServedModel(db: Knex, dataDir: string, registry: ModelRegistry, principal: Principal, name: string): Promise<ServedModel> {
  const base = await registry.get(name);
  if (base) return { id: base.id, base, adapterPath: null };
  const m = CHECKPOINT.exec(name);
  if (m && m[1] === principal.entity) {
    const model = await findModelByName(db, m[1], m[2], m[3]);
    if (model) {
      const checkpoint = await findCheckpoint(db, dataDir, model.id, m[4] === undefined ? undefined : Number(m[4]));
      const modelBase = checkpoint ? await registry.get(model.base_model) : undefined;
      if (checkpoint && modelBase) return { id: checkpointName(model, checkpoint.step), base: modelBase, adapterPath: checkpoint.adapterPath };
    }
  }
  throw notFound(`The model '${name}' does not exist.`, "model_not_found");
}

/** Every checkpoint of the entity, as the model list shows them. */
export async function listServedCheckpoints(db: Knex, principal: Principal): Promise<{ id: string; baseModel: string; created: number }[]> {
  const rows: { entity: string; project: string; name: string; base_model: string; step: number; created_at: unknown }[] = await db("checkpoints")
    .join("models", "models.id", "checkpoints.model_id")
    .where("models.entity", principal.entity)
    .orderBy([{ column: "models.seq" }, { column: "checkpoints.step" }])
    .select("models.entity", "models.project", "models.name", "models.base_model", "checkpoints.step", "checkpoints.created_at");
  return rows.map((r) => ({ id: checkpointName(r, Number(r.step)), baseModel: r.base_model, created: Math.floor(Date.parse(toIso(r.created_at)) / 1000) }));
}
