export interface AdvantageOptions {
  scaleRewards: boolean;
  normalizeAdvantages: boolean;
  advantageBalance: number;
}

export interface GroupAdvantages {
  /** One per trajectory of each group; undefined for groups skipped because all rewards were equal. */
  advantages: (number[] | undefined)[];
  skippedGroups: number;
  rewardMean: number;
  rewardStd: number;
}

function meanStd(xs: number[]): { mean: number; std: number } {
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  const variance = xs.reduce((a, b) => a + (b - mean) ** 2, 0) / xs.length;
  return { mean, std: Math.sqrt(variance) };
}

/**
 * Per group: reward − group mean, divided by (group std + 1e-6) when scaleRewards (population std). Groups whose
 * rewards are all equal carry no signal and are skipped. normalizeAdvantages then rescales all kept advantages to
 * unit standard deviation across the batch; advantageBalance b weights positive ones by (1 + b) and negative ones
 * by (1 − b), so −1 learns only from failures and +1 only from successes.
 */
export function computeAdvantages(rewardsByGroup: number[][], options: AdvantageOptions): GroupAdvantages {
  const all = rewardsByGroup.flat();
  const overall = all.length > 0 ? meanStd(all) : { mean: 0, std: 0 };
  let skippedGroups = 0;
  const advantages = rewardsByGroup.map((rewards) => {
    if (rewards.length === 0 || rewards.every((r) => r === rewards[0])) {
      skippedGroups++;
      return undefined;
    }
    const { mean, std } = meanStd(rewards);
    return rewards.map((r) => (options.scaleRewards ? (r - mean) / (std + 1e-6) : r - mean));
  });
  if (options.normalizeAdvantages) {
    const kept = advantages.flatMap((a) => a ?? []);
    const { std } = meanStd(kept.length > 0 ? kept : [0]);
    advantages.forEach((a) => a?.forEach((v, i) => (a[i] = v / (std + 1e-6))));
  }
  const b = options.advantageBalance;
  if (b !== 0) advantages.forEach((a) => a?.forEach((v, i) => (a[i] = v * (v > 0 ? 1 + b : 1 - b))));
  return { advantages, skippedGroups, rewardMean: overall.mean, rewardStd: overall.std };
}
