import { tf } from "./backend.js";
import type { ChatMessage, ChatTool, Choice } from "./chat-types.js";
import { isChoice } from "./chat-types.js";
import { tokenizeTrajectory, type TokenizedSequence } from "./chat-tokens.js";
import { openModelChat } from "./model-tokenizer.js";
import { computeAdvantages } from "./rl-advantages.js";
import { rlSequenceLoss, type RlLossStats } from "./rl-loss.js";
import { parseRlConfig } from "./train-config.js";
import type { TrainingStart } from "./train-sft.js";
import { runTrainingLoop, type TrainResult } from "./train-loop.js";
import { planSteps, type OnStep } from "./train-step.js";
import { tokenLogProbs } from "./token-logprobs.js";

export interface History {
  messages_and_choices: (ChatMessage | Choice)[];
  tools?: ChatTool[] | null;
}

export interface Trajectory extends History {
  reward: number;
  additional_histories?: History[] | null;
}

export interface TrajectoryGroup {
  trajectories: Trajectory[];
}

export interface RlJob {
  baseModelPath: string;
  adapterPath?: string;
  outputPath: string;
  groups: TrajectoryGroup[];
  experimentalConfig?: Record<string, unknown>;
  signal?: AbortSignal;
  onStart?: (info: TrainingStart & { num_groups: number; num_skipped_groups: number }) => void | Promise<void>;
}

interface RlSequence extends TokenizedSequence {
  advantage: number;
}

function choicesWithoutLogprobs(history: History): number {
  return history.messages_and_choices.filter((it) => isChoice(it) && !(it.logprobs?.content && it.logprobs.content.length > 0)).length;
}

/**
 * One RL training job over trajectory groups (CONTRACT §2): group-relative advantages, only Choice tokens trained,
 * the Choice logprobs as the old policy, clipped-ratio (default) or PPO loss averaged over trained tokens.
 */
export async function trainRl(job: RlJob, onStep: OnStep): Promise<TrainResult> {
  const { config, ignoredKeys } = parseRlConfig(job.experimentalConfig);
  const rewards = job.groups.map((g) => g.trajectories.map((t) => t.reward));
  if (rewards.flat().some((r) => typeof r !== "number" || !Number.isFinite(r))) throw new Error("every trajectory needs a finite reward");
  const adv = computeAdvantages(rewards, config);

  const sequences: RlSequence[] = [];
  let dropped = 0;
  const chat = await openModelChat(job.baseModelPath);
  try {
    const tokenizeOptions = { renderer: chat.renderer, tokenizer: chat.tokenizer, maxLength: Math.min(config.maxSequenceLength, chat.contextLength), overflow: config.overflow };
    job.groups.forEach((group, gi) => {
      const groupAdvantages = adv.advantages[gi];
      if (!groupAdvantages) return;
      group.trajectories.forEach((trajectory, ti) => {
        const advantage = groupAdvantages[ti];
        // A zero advantage contributes nothing unless a KL penalty still pulls towards the base.
        if (advantage === 0 && config.klPenaltyCoef === 0) return;
        for (const history of [trajectory, ...(trajectory.additional_histories ?? [])]) {
          if (!config.allowTrainingWithoutLogprobs && choicesWithoutLogprobs(history) > 0) {
            throw new Error(
              `trajectory ${ti} of group ${gi} has a choice without logprobs; request logprobs when sampling ` +
                "or set allow_training_without_logprobs",
            );
          }
          const r = tokenizeTrajectory(history.messages_and_choices, history.tools ?? undefined, tokenizeOptions);
          if (r.ok) sequences.push({ ...r.sequence, advantage });
          else dropped++;
        }
      });
    });
  } finally {
    await chat.dispose();
  }

  const plan = planSteps(sequences, config.batchSize, config.tokensPerStep);
  const truncated = sequences.filter((s) => s.truncated).length;
  await job.onStart?.({
    num_sequences: sequences.length,
    num_steps: plan.length,
    dropped_sequences: dropped,
    truncated_sequences: truncated,
    num_groups: job.groups.length,
    num_skipped_groups: adv.skippedGroups,
  });
  const advantages = sequences.map((s) => s.advantage);
  const advMean = advantages.length ? advantages.reduce((a, b) => a + b, 0) / advantages.length : 0;
  const advStd = advantages.length ? Math.sqrt(advantages.reduce((a, b) => a + (b - advMean) ** 2, 0) / advantages.length) : 0;
  const batchStats = {
    reward_mean: adv.rewardMean,
    reward_std: adv.rewardStd,
    advantage_mean: advMean,
    advantage_std: advStd,
    advantage_abs_mean: advantages.length ? advantages.reduce((a, b) => a + Math.abs(b), 0) / advantages.length : 0,
    num_groups: job.groups.length,
    num_skipped_groups: adv.skippedGroups,
    num_trajectories: rewards.flat().length,
  };

  return runTrainingLoop(
    job,
    config,
    plan,
    (session, batch, step, trainable) => {
      const stats: RlLossStats = { ratioSum: 0, clippedTokens: 0, klSum: 0 };
      const parts = batch.map((seq, k) => {
        const mask = Float32Array.from(seq.trainable.subarray(1));
        const oldLogprobs = seq.oldLogprobs.subarray(1);
        // The reference is the base model: the same weights with the adapter off.
        const referenceLogprobs =
          config.klPenaltyCoef > 0 ? tf.tidy(() => tokenLogProbs(session.model, seq.tokens).dataSync() as Float32Array) : undefined;
        return () => {
          const logprobs = tokenLogProbs(session.model, seq.tokens, {
            adapter: session.adapter,
            training: true,
            dropoutSeed: config.seed + step * 1000 + k,
          });
          return rlSequenceLoss({ logprobs, oldLogprobs, mask, advantage: seq.advantage, referenceLogprobs }, config, stats).div(
            trainable,
          ) as tf.Scalar;
        };
      });
      const metrics = () => ({
        ...batchStats,
        importance_ratio_mean: trainable ? stats.ratioSum / trainable : 1,
        clipped_fraction: trainable ? stats.clippedTokens / trainable : 0,
        ...(config.klPenaltyCoef > 0 ? { kl: trainable ? stats.klSum / trainable : 0 } : {}),
      });
      return { parts, metrics };
    },
    onStep,
    { numSequences: sequences.length, droppedSequences: dropped, truncatedSequences: truncated, ignoredConfigKeys: ignoredKeys },
  );
}
