import { readdir, stat } from "node:fs/promises";
import path from "node:path";
import type { Knex } from "knex";
import { readGgufHeader } from "../gguf/reader.js";
import { invalid } from "../errors.js";
import { toIso } from "../store/values.js";

export interface BaseModel {
  id: string;
  /** A GGUF file served here by llama.cpp; absent for an upstream model. */
  path?: string;
  upstream?: { url: string; model: string; keyEnv?: string };
  architecture: string | null;
  contextLength: number | null;
  created: number;
}

export const DEFAULT_MODEL_ID = "tiny-chat";
const ID_PATTERN = /^[A-Za-z0-9_.-]{1,200}$/;

/**
 * The base models this server serves: every `*.gguf` in the models directory (its id is the file name without
 * `.gguf`), plus models registered with `gyre models add` (a GGUF file elsewhere, or an upstream engine).
 */
export class ModelRegistry {
  private headerCache = new Map<string, { mtime: number; architecture: string | null; contextLength: number | null }>();

  constructor(
    private readonly db: Knex,
    readonly modelsDir: string,
  ) {}

  async list(): Promise<BaseModel[]> {
    const models = new Map<string, BaseModel>();
    for (const file of await this.ggufFiles()) {
      const id = path.basename(file, ".gguf");
      if (ID_PATTERN.test(id)) models.set(id, await this.describeFile(id, file));
    }
    const rows: { id: string; path: string | null; upstream_url: string | null; upstream_model: string | null; upstream_key_env: string | null; created_at: unknown }[] =
      await this.db("base_models").orderBy("id");
    for (const row of rows) {
      if (row.path) {
        models.set(row.id, { ...(await this.describeFile(row.id, row.path)), created: Math.floor(Date.parse(toIso(row.created_at)) / 1000) });
      } else if (row.upstream_url && row.upstream_model) {
        models.set(row.id, {
          id: row.id,
          upstream: { url: row.upstream_url, model: row.upstream_model, keyEnv: row.upstream_key_env ?? undefined },
          architecture: null,
          contextLength: null,
          created: Math.floor(Date.parse(toIso(row.created_at)) / 1000),
        });
      }
    }
    return [...models.values()].sort((a, b) => a.id.localeCompare(b.id));
  }

  async get(id: string): Promise<BaseModel | undefined> {
    return (await this.list()).find((m) => m.id === id);
  }

  async hasBaseModel(id: string): Promise<boolean> {
    return (await this.get(id)) !== undefined;
  }

  /** Registers a GGUF file by path; it must be readable as GGUF. */
  async addFile(file: string, id?: string): Promise<BaseModel> {
    const absolute = path.resolve(file);
    const modelId = id ?? path.basename(absolute, ".gguf");
    if (!ID_PATTERN.test(modelId)) throw invalid(`Invalid model id '${modelId}': use letters, digits, '_', '.', '-'.`, ["id"]);
    await readGgufHeader(absolute).catch((err: Error) => {
      throw invalid(`${absolute} is not a readable GGUF file: ${err.message}`, ["path"]);
    });
    await this.db("base_models").insert({ id: modelId, path: absolute, created_at: new Date() }).onConflict("id").merge();
    return (await this.get(modelId))!;
  }

  /** Routes a model id to an upstream OpenAI-compatible engine (vLLM, SGLang, llama.cpp server). */
  async addUpstream(id: string, upstream: { url: string; model: string; keyEnv?: string }): Promise<BaseModel> {
    if (!ID_PATTERN.test(id)) throw invalid(`Invalid model id '${id}': use letters, digits, '_', '.', '-'.`, ["id"]);
    await this.db("base_models")
      .insert({ id, path: null, upstream_url: upstream.url.replace(/\/+$/, ""), upstream_model: upstream.model, upstream_key_env: upstream.keyEnv ?? null, created_at: new Date() })
      .onConflict("id")
      .merge();
    return (await this.get(id))!;
  }

  async remove(id: string): Promise<boolean> {
    return (await this.db("base_models").where({ id }).delete()) > 0;
  }

  private async ggufFiles(): Promise<string[]> {
    try {
      const names = await readdir(this.modelsDir);
      return names.filter((n) => n.endsWith(".gguf")).map((n) => path.join(this.modelsDir, n));
    } catch {
      return [];
    }
  }

  /** Architecture and context length come from the GGUF header, read once per file version. */
  private async describeFile(id: string, file: string): Promise<BaseModel> {
    const info = await stat(file).catch(() => null);
    if (!info) return { id, path: file, architecture: null, contextLength: null, created: 0 };
    let cached = this.headerCache.get(file);
    if (!cached || cached.mtime !== info.mtimeMs) {
      try {
        const header = await readGgufHeader(file);
        const arch = typeof header.metadata["general.architecture"] === "string" ? (header.metadata["general.architecture"] as string) : null;
        const ctx = arch ? header.metadata[`${arch}.context_length`] : undefined;
        cached = { mtime: info.mtimeMs, architecture: arch, contextLength: ctx === undefined ? null : Number(ctx) };
      } catch {
        cached = { mtime: info.mtimeMs, architecture: null, contextLength: null };
      }
      this.headerCache.set(file, cached);
    }
    return { id, path: file, architecture: cached.architecture, contextLength: cached.contextLength, created: Math.floor(info.mtimeMs / 1000) };
  }
}
