import { ModelRegistry } from "../inference/model-registry.js";
import { UsageError, withDatabase, type Command } from "./command.js";

export const modelsCommand: Command = (args) =>
  withDatabase(args.config, async (db) => {
    const registry = new ModelRegistry(db, args.config.modelsDir);
    const [sub, target] = args.words;
    if (sub === "list" || sub === undefined) {
      for (const m of await registry.list()) {
        const source = m.path ?? `${m.upstream!.url} (${m.upstream!.model})`;
        args.out(`${m.id}\t${m.architecture ?? "-"}\tctx ${m.contextLength ?? "-"}\t${source}\n`);
      }
      return 0;
    }
    if (sub === "add") {
      if (!target) throw new UsageError("models add needs the path of a GGUF file");
      const model = await registry.addFile(target, args.options.id as string | undefined);
      args.out(`added ${model.id}: ${model.architecture ?? "unknown architecture"}, context ${model.contextLength ?? "unknown"}, ${model.path}\n`);
      return 0;
    }
    if (sub === "add-upstream") {
      const { url, model } = args.options;
      if (!target || typeof url !== "string" || typeof model !== "string") {
        throw new UsageError("models add-upstream needs an ID, --url BASE_URL (ending in /v1) and --model NAME [--key-env VAR]");
      }
      await registry.addUpstream(target, { url, model, keyEnv: args.options["key-env"] as string | undefined });
      args.out(`added ${target}: served by ${url} as ${model}\n`);
      return 0;
    }
    if (sub === "remove") {
      if (!target) throw new UsageError("models remove needs a model id");
      const removed = await registry.remove(target);
      args.out(removed ? `removed ${target}\n` : `no registered model ${target} (files in the models directory are removed by deleting them)\n`);
      return removed ? 0 : 1;
    }
    throw new UsageError(`unknown models command '${sub}'`);
  });
