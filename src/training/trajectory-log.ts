import type { Knex } from "knex";
import type { Principal } from "../auth/keys.js";
import { getModel } from "./models.js";

export interface LogInput {
  split: string;
  trajectory_groups: {
    trajectories: { reward: number; metrics?: Record<string, number | boolean> | null }[];
    exceptions?: unknown[] | null;
  }[];
}

export interface LogResult {
  model_id: string;
  split: string;
  step: number;
  num_groups: number;
  num_trajectories: number;
  num_exceptions: number;
  metrics: Record<string, number>;
}

const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);

/** Stores the trajectory groups of a split at the model's current step and returns their metrics. */
export async function logTrajectories(db: Knex, principal: Principal, modelId: string, input: LogInput): Promise<LogResult> {
  const model = await getModel(db, principal, modelId);
  const trajectories = input.trajectory_groups.flatMap((g) => g.trajectories);
  const rewards = trajectories.map((t) => t.reward);
  const rewardMean = mean(rewards);
  const metrics: Record<string, number> = {
    reward: rewardMean,
    reward_std: Math.sqrt(mean(rewards.map((r) => (r - rewardMean) ** 2))),
  };
  const byName = new Map<string, number[]>();
  for (const t of trajectories) {
    for (const [name, value] of Object.entries(t.metrics ?? {})) {
      if (!byName.has(name)) byName.set(name, []);
      byName.get(name)!.push(typeof value === "boolean" ? Number(value) : value);
    }
  }
  for (const [name, values] of byName) metrics[name] = mean(values);
  const result: LogResult = {
    model_id: model.id,
    split: input.split,
    step: model.latest_step,
    num_groups: input.trajectory_groups.length,
    num_trajectories: trajectories.length,
    num_exceptions: input.trajectory_groups.reduce((n, g) => n + (g.exceptions?.length ?? 0), 0),
    metrics,
  };
  await db("trajectory_logs").insert({
    model_id: model.id,
    split: input.split,
    step: model.latest_step,
    groups: JSON.stringify(input.trajectory_groups),
    metrics: JSON.stringify(result.metrics),
    created_at: new Date(),
  });
  return result;
}
