import type { Knex } from "knex";
import type { Principal } from "../auth/keys.js";
import { AppError } from "../errors.js";
import { listServedCheckpoints, resolveServedModel, type ServedModel } from "../training/served-models.js";
import type { EnginePool } from "./engine-pool.js";
import { DEFAULT_MODEL_ID, type ModelRegistry } from "./model-registry.js";
import type { ChatCompletion, ChatCompletionChunk, ChatCompletionRequest, Engine, GenerateOptions } from "./types.js";
import { recordUsage, tokensThisMonth } from "./usage.js";

export interface ChatCaller {
  principal: Principal;
  /** Project (of the caller's entity) the usage is attributed to. */
  project?: string;
}

export interface ListedModel {
  id: string;
  object: "model";
  created: number;
  owned_by: string;
  root: string;
  parent: string | null;
  context_length: number | null;
  architecture: string | null;
}

interface Prepared {
  served: ServedModel;
  engine: Engine;
  options: GenerateOptions;
}

/**
 * Chat completions on base models and trained checkpoints, for both chat endpoints: resolves the model, applies the
 * checkpoint's adapter, runs the engine, and records usage.
 */
export class ChatService {
  constructor(
    private readonly db: Knex,
    private readonly dataDir: string,
    private readonly registry: ModelRegistry,
    private readonly engines: EnginePool,
    /** Tokens per entity per calendar month; 0 means no limit. */
    private readonly tokenQuota = 0,
  ) {}

  async complete(caller: ChatCaller, request: ChatCompletionRequest, signal?: AbortSignal): Promise<ChatCompletion> {
    const { served, engine, options } = await this.prepare(caller, request, signal);
    const completion = await engine.complete({ ...request, model: served.id }, options);
    await this.record(caller, served, completion.usage);
    return { ...completion, model: served.id };
  }

  /** Resolves the model before the first chunk, so an unknown model is an error status, not a broken stream. */
  async stream(caller: ChatCaller, request: ChatCompletionRequest, signal?: AbortSignal): Promise<AsyncIterable<ChatCompletionChunk>> {
    const { served, engine, options } = await this.prepare(caller, request, signal);
    const wantsUsage = request.stream_options?.include_usage === true;
    // Usage is always asked of the engine, so it can be recorded; the client sees it only if it asked.
    const chunks = engine.stream({ ...request, model: served.id, stream: true, stream_options: { include_usage: true } }, options);
    const record = (usage: ChatCompletion["usage"]) => this.record(caller, served, usage);
    return (async function* () {
      for await (const chunk of chunks) {
        if (chunk.usage) await record(chunk.usage);
        if (chunk.usage && chunk.choices.length === 0 && !wantsUsage) continue;
        yield { ...chunk, model: served.id, ...(wantsUsage ? {} : { usage: undefined }) };
      }
    })();
  }

  async listModels(principal: Principal): Promise<ListedModel[]> {
    const bases = await this.registry.list();
    const listed: ListedModel[] = bases.map((b) => ({
      id: b.id,
      object: "model",
      created: b.created,
      owned_by: "gyre",
      root: b.id,
      parent: null,
      context_length: b.contextLength,
      architecture: b.architecture,
    }));
    for (const c of await listServedCheckpoints(this.db, principal)) {
      const base = bases.find((b) => b.id === c.baseModel);
      listed.push({
        id: c.id,
        object: "model",
        created: c.created,
        owned_by: principal.entity,
        root: c.baseModel,
        parent: c.baseModel,
        context_length: base?.contextLength ?? null,
        architecture: base?.architecture ?? null,
      });
    }
    return listed;
  }

  private async prepare(caller: ChatCaller, request: ChatCompletionRequest, signal?: AbortSignal): Promise<Prepared> {
    if (this.tokenQuota > 0 && (await tokensThisMonth(this.db, caller.principal.entity)) >= this.tokenQuota) {
      throw new AppError("quota_exceeded", `Token quota of ${this.tokenQuota} per month exceeded for entity '${caller.principal.entity}'.`, undefined, "insufficient_quota");
    }
    const name = request.model ?? (await this.defaultModel());
    const served = await resolveServedModel(this.db, this.dataDir, this.registry, caller.principal, name);
    const engine = await this.engines.engineFor(served.base);
    return { served, engine, options: { signal, ...(served.adapterPath ? { lora: { path: served.adapterPath } } : {}) } };
  }

  private async defaultModel(): Promise<string> {
    const models = await this.registry.list();
    const chosen = models.find((m) => m.id === DEFAULT_MODEL_ID) ?? models[0];
    if (!chosen) throw new AppError("unavailable", "No model is configured; add one with `gyre models add PATH`.", undefined, "no_model");
    return chosen.id;
  }

  private async record(caller: ChatCaller, served: ServedModel, usage: ChatCompletion["usage"]): Promise<void> {
    await recordUsage(this.db, {
      principal: caller.principal,
      project: caller.project,
      model: served.id,
      promptTokens: usage.prompt_tokens,
      completionTokens: usage.completion_tokens,
    });
  }
}
