import { usageTotals } from "../inference/usage.js";
import { operatorOf, withDatabase, type Command } from "./command.js";

export const usageCommand: Command = (args) =>
  withDatabase(args.config, async (db) => {
    const principal = operatorOf(args);
    const project = typeof args.options.project === "string" ? args.options.project.split("/").pop() : undefined;
    const rows = await usageTotals(db, principal, {
      project,
      model: args.options.model as string | undefined,
      since: typeof args.options.since === "string" ? new Date(args.options.since) : undefined,
    });
    args.out(["project", "model", "requests", "prompt", "completion", "total"].join("\t") + "\n");
    for (const r of rows) args.out([r.project, r.model, r.requests, r.prompt_tokens, r.completion_tokens, r.total_tokens].join("\t") + "\n");
    return 0;
  });
