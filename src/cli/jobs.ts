import type { Knex } from "knex";
import { listEvents, type TrainingEvent } from "../training/events.js";
import { getJob, listJobs } from "../training/jobs.js";
import { operatorOf, UsageError, withDatabase, type Command, type CommandArgs } from "./command.js";

export const jobsCommand: Command = (args) =>
  withDatabase(args.config, async (db) => {
    const [sub, id] = args.words;
    if (sub === "list" || sub === undefined) {
      const page = await listJobs(db, operatorOf(args), { limit: 100, model_id: args.options.model as string | undefined });
      args.out(["id", "kind", "status", "model", "created", "step"].join("\t") + "\n");
      for (const j of page.data) args.out([j.id, j.kind, j.status, j.model_id, j.created_at, j.result_step ?? "-"].join("\t") + "\n");
      return 0;
    }
    if (sub === "follow") {
      if (!id) throw new UsageError("jobs follow needs a job id (see 'gyre jobs list')");
      return follow(db, args, id);
    }
    throw new UsageError(`unknown jobs command '${sub}'`);
  });

const fmt = (v: unknown) => (typeof v === "number" ? (Math.abs(v) >= 1000 || Number.isInteger(v) ? String(Math.round(v)) : v.toPrecision(4)) : String(v));

/** Shows each step's metrics under a live progress bar until the job ends; the exit code tells how it ended. */
async function follow(db: Knex, args: CommandArgs, jobId: string): Promise<number> {
  const principal = operatorOf(args);
  let job = await getJob(db, principal, jobId);
  const tty = Boolean(process.stdout.isTTY);
  let after: string | undefined;
  let totalSteps = 0;
  args.out(`job ${job.id} (${job.kind}) on model ${job.model_id}: ${job.status}\n`);
  for (;;) {
    const page = await listEvents(db, jobId, { after, limit: 100 });
    for (const event of page.data) {
      totalSteps = (event.data.num_steps as number | undefined) ?? totalSteps;
      if (tty) args.out("\r\x1b[2K");
      args.out(describe(event) + "\n");
      if (tty && event.type === "gradient_step") args.out(bar(Number(event.data.step), totalSteps));
    }
    if (page.data.length) after = page.last_id;
    if (page.has_more) continue;
    job = await getJob(db, principal, jobId);
    if (!["queued", "running"].includes(job.status) && !page.data.length) break;
    await new Promise((r) => setTimeout(r, 1000));
  }
  if (tty) args.out("\r\x1b[2K");
  args.out(`job ${job.status}${job.result_step !== null ? `: checkpoint step ${job.result_step}` : ""}${job.error ? `: ${job.error}` : ""}\n`);
  return job.status === "succeeded" ? 0 : 1;
}

function describe(event: TrainingEvent): string {
  const { step, ...rest } = event.data;
  if (event.type === "gradient_step") {
    const shown = ["loss", "grad_norm", "learning_rate", "num_trainable_tokens", "tokens_per_second", "reward_mean"].filter((k) => k in rest);
    return `step ${step}  ` + shown.map((k) => `${k} ${fmt(rest[k])}`).join("  ");
  }
  if (event.type === "training_failed") return `failed: ${String(event.data.error_message)}`;
  return `${event.type.replace("_", " ")}  ` + Object.entries(event.data).map(([k, v]) => `${k} ${fmt(v)}`).join("  ");
}

function bar(step: number, total: number): string {
  if (!total) return `[step ${step}]`;
  const width = 30;
  const done = Math.min(width, Math.round((step / total) * width));
  return `[${"=".repeat(done)}${" ".repeat(width - done)}] ${step}/${total}`;
}
