import type { Knex } from "knex";
import { forbidden, invalid } from "../errors.js";
import type { Principal } from "./keys.js";

export interface ProjectRef {
  entity: string;
  project: string;
}

const PART = /^[A-Za-z0-9_.-]{1,100}$/;

/** Parses `entity/project`; `loc` says where the value came from, for the error. */
export function parseProjectId(value: string, loc: (string | number)[]): ProjectRef {
  const [entity, project, ...rest] = value.split("/");
  if (rest.length > 0 || !entity || !project || !PART.test(entity) || !PART.test(project)) {
    throw invalid(`Expected 'entity/project' (letters, digits, '_', '.', '-'), got '${value}'.`, loc, "project_id_format");
  }
  return { entity, project };
}

/** The permission check: a key reaches only the projects of its own entity. */
export function authorizeProject(principal: Principal, ref: ProjectRef): ProjectRef {
  if (ref.entity !== principal.entity) {
    throw forbidden(`This API key cannot reach project '${ref.entity}/${ref.project}'.`, "project_not_allowed");
  }
  return ref;
}

/** Projects come into being on first use by a key of their entity. */
export async function ensureProject(db: Knex, ref: ProjectRef): Promise<void> {
  await db("projects").insert({ entity: ref.entity, name: ref.project, created_at: new Date() }).onConflict(["entity", "name"]).ignore();
}
