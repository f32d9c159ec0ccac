/**
 * Runs one training job in a process of its own, so the trainer's heavy tensor work never blocks the server's
 * event loop, a crash takes down only this process, and cancelling is a kill. Talks to its worker over IPC.
 */
import { readFile } from "node:fs/promises";
import { trainRl, trainSft, type SftExample, type TrainResult, type TrajectoryGroup } from "./trainer/index.js";

export interface JobSpec {
  kind: "sft" | "rl";
  baseModelPath: string;
  adapterPath?: string;
  outputPath: string;
  /** SFT: a JSON Lines file of examples; RL: a JSON file `{trajectory_groups}`. */
  dataPath: string;
  config: Record<string, unknown>;
  experimentalConfig: Record<string, unknown>;
}

export type JobMessage =
  | { type: "started"; data: { num_sequences: number } & Record<string, unknown> }
  | { type: "step"; metrics: Record<string, number> }
  | { type: "done"; metrics: Record<string, number> }
  | { type: "failed"; message: string };

function send(message: JobMessage): Promise<void> {
  return new Promise((resolve, reject) => process.send!(message, (err: Error | null) => (err ? reject(err) : resolve())));
}

async function run(spec: JobSpec): Promise<Record<string, number>> {
  const common = {
    baseModelPath: spec.baseModelPath,
    adapterPath: spec.adapterPath,
    outputPath: spec.outputPath,
    experimentalConfig: spec.experimentalConfig,
    onStart: (info: { num_sequences: number }) => send({ type: "started", data: { ...info } }),
  };
  const onStep = (metrics: Record<string, number>) => send({ type: "step", metrics });
  let result: TrainResult;
  if (spec.kind === "sft") {
    const text = await readFile(spec.dataPath, "utf8");
    const examples = text
      .split("\n")
      .filter((l) => l.trim())
      .map((l) => JSON.parse(l) as SftExample);
    result = await trainSft({ ...common, examples, config: spec.config }, onStep);
  } else {
    const { trajectory_groups } = JSON.parse(await readFile(spec.dataPath, "utf8")) as { trajectory_groups: TrajectoryGroup[] };
    result = await trainRl({ ...common, groups: trajectory_groups }, onStep);
  }
  return finalMetrics(result.finalMetrics, { steps: result.steps, num_sequences: result.numSequences });
}

/** A checkpoint's metrics: the last step's, without its step counter (the checkpoint has its own step). */
function finalMetrics(last: Record<string, number> | undefined, totals: Record<string, number>): Record<string, number> {
  const { step: _gradientStep, ...rest } = last ?? {};
  return { ...rest, ...totals };
}

// A worker that died (or was killed) leaves nobody to report to: stop at once instead of training for nothing.
process.once("disconnect", () => process.exit(1));

process.once("message", (spec: JobSpec) => {
  run(spec).then(
    async (metrics) => {
      await send({ type: "done", metrics });
      process.exit(0);
    },
    async (err: Error) => {
      await send({ type: "failed", message: err.message }).catch(() => undefined);
      process.exit(1);
    },
  );
});
