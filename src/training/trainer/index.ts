/** The LoRA trainer: GGUF base weights in tfjs, SFT and RL jobs, adapters written as llama.cpp GGUF LoRA files. */
export { trainSft, type SftExample, type SftJob, type TrainingStart } from "./train-sft.js";
export type { TrainResult } from "./train-loop.js";
export { trainRl, type RlJob, type Trajectory, type TrajectoryGroup, type History } from "./train-rl.js";
export type { OnStep, StepMetrics } from "./train-step.js";
export { parseRlConfig, parseSftConfig, type RlConfig, type SftConfig } from "./train-config.js";
export { SUPPORTED_ARCHITECTURES } from "./model-config.js";
