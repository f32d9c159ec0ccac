import type { Logger } from "../logging.js";
import { LlamaEngine, type LlamaEngineOptions } from "./llama-engine.js";
import type { BaseModel } from "./model-registry.js";
import type { Engine } from "./types.js";
import { UpstreamEngine } from "./upstream-engine.js";

export type EngineSettings = Omit<LlamaEngineOptions, "modelPath" | "llama">;

/** One engine per base model, loaded on first use and kept; loading twice at once is avoided. */
export class EnginePool {
  private readonly engines = new Map<string, Promise<Engine>>();

  constructor(
    private readonly settings: EngineSettings,
    private readonly logger: Logger,
  ) {}

  engineFor(model: BaseModel): Promise<Engine> {
    const key = `${model.id}\u0000${model.path ?? model.upstream?.url}`;
    let engine = this.engines.get(key);
    if (!engine) {
      engine = this.load(model);
      this.engines.set(key, engine);
      engine.catch(() => this.engines.delete(key));
    }
    return engine;
  }

  private async load(model: BaseModel): Promise<Engine> {
    if (model.upstream) return new UpstreamEngine(model.upstream);
    if (!model.path) throw new Error(`Model ${model.id} has neither a file nor an upstream.`);
    const started = performance.now();
    const engine = await LlamaEngine.load({ ...this.settings, modelPath: model.path });
    this.logger.info({ model: model.id, ms: Math.round(performance.now() - started) }, "model loaded");
    return engine;
  }

  async close(): Promise<void> {
    const engines = await Promise.allSettled([...this.engines.values()]);
    this.engines.clear();
    for (const e of engines) if (e.status === "fulfilled") await e.value.close();
  }
}
