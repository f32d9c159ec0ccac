import { tf } from "./backend.js";
import type { ChatMessage, ChatTool } from "./chat-types.js";
import { tokenizeSftConversation, type TokenizedSequence } from "./chat-tokens.js";
import { openModelChat } from "./model-tokenizer.js";
import { parseSftConfig } from "./train-config.js";
import { runTrainingLoop, type TrainResult } from "./train-loop.js";
import { planSteps, shuffled, type OnStep } from "./train-step.js";
import { tokenLogProbs } from "./token-logprobs.js";

export interface SftExample {
  messages: ChatMessage[];
  tools?: ChatTool[];
}

export interface TrainingStart {
  num_sequences: number;
  num_steps: number;
  dropped_sequences: number;
  truncated_sequences: number;
}

export interface SftJob {
  baseModelPath: string;
  /** The adapter of the checkpoint to continue from; none trains a fresh adapter. */
  adapterPath?: string;
  /** Where the new adapter (GGUF) is written. */
  outputPath: string;
  examples: SftExample[];
  /** The job's `config` ({batch_size, learning_rate}) and `experimental_config`. */
  config?: Record<string, unknown>;
  experimentalConfig?: Record<string, unknown>;
  signal?: AbortSignal;
  onStart?: (info: TrainingStart) => void | Promise<void>;
}

/** Supervised fine-tuning: cross-entropy on assistant tokens, averaged over all trained tokens of each step. */
export async function trainSft(job: SftJob, onStep: OnStep): Promise<TrainResult> {
  const { config, ignoredKeys } = parseSftConfig(job.config, job.experimentalConfig);
  const chat = await openModelChat(job.baseModelPath);
  const sequences: TokenizedSequence[] = [];
  let dropped = 0;
  try {
    const tokenizeOptions = { renderer: chat.renderer, tokenizer: chat.tokenizer, maxLength: Math.min(config.maxSequenceLength, chat.contextLength), overflow: config.overflow };
    for (const example of job.examples) {
      const r = tokenizeSftConversation(example.messages, example.tools, config.assistantTurns, tokenizeOptions);
      if (r.ok) sequences.push(r.sequence);
      else dropped++;
    }
  } finally {
    await chat.dispose();
  }
  if (sequences.length === 0) throw new Error(`no trainable sequence in ${job.examples.length} examples (${dropped} dropped)`);

  const plan: TokenizedSequence[][] = [];
  for (let epoch = 0; epoch < config.epochs; epoch++) {
    plan.push(...planSteps(shuffled(sequences, config.seed + epoch), config.batchSize, config.tokensPerStep));
  }
  const truncated = sequences.filter((s) => s.truncated).length;
  await job.onStart?.({ num_sequences: sequences.length, num_steps: plan.length, dropped_sequences: dropped, truncated_sequences: truncated });

  return runTrainingLoop(
    job,
    config,
    plan,
    (session, batch, step, trainable) => ({
      parts: batch.map((seq, k) => () => {
        const lp = tokenLogProbs(session.model, seq.tokens, {
          adapter: session.adapter,
          training: true,
          dropoutSeed: config.seed + step * 1000 + k,
        });
        const mask = tf.tensor1d(Float32Array.from(seq.trainable.subarray(1)));
        return lp.mul(mask).sum().neg().div(trainable) as tf.Scalar;
      }),
    }),
    onStep,
    { numSequences: sequences.length, droppedSequences: dropped, truncatedSequences: truncated, ignoredConfigKeys: ignoredKeys },
  );
}
