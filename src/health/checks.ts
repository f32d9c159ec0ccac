import type { Knex } from "knex";

export interface ComponentCheck {
  success: boolean;
  /** Seconds. */
  duration: number;
  errors: string[];
  details?: Record<string, unknown>;
}

export type Device = "cpu" | "gpu";

/** A worker that has not sent a heartbeat for this long is taken for dead. */
export const WORKER_STALE_MS = 30_000;

async function timed(fn: () => Promise<{ errors: string[]; details?: Record<string, unknown> }>): Promise<ComponentCheck> {
  const started = performance.now();
  try {
    const { errors, details } = await fn();
    return { success: errors.length === 0, duration: (performance.now() - started) / 1000, errors, details };
  } catch (err) {
    return { success: false, duration: (performance.now() - started) / 1000, errors: [(err as Error).message] };
  }
}

export function checkApi(): Promise<ComponentCheck> {
  return timed(async () => ({ errors: [], details: { uptime_seconds: Math.round(process.uptime()) } }));
}

export function checkDatabase(db: Knex): Promise<ComponentCheck> {
  return timed(async () => {
    await db.raw("select 1");
    return { errors: [] };
  });
}

/**
 * A queue is healthy when it can be read, no running job has outlived its lease (its worker died and nobody
 * took the job back), and queued jobs have at least one live worker that can take them.
 */
export function checkQueue(db: Knex, device: Device, now = new Date()): Promise<ComponentCheck> {
  return timed(async () => {
    const counts = (await db("training_jobs")
      .where({ device })
      .whereIn("status", ["queued", "running"])
      .groupBy("status")
      .select("status")
      .count({ n: "*" })) as { status: string; n: number | string }[];
    const count = (status: string) => Number(counts.find((c) => c.status === status)?.n ?? 0);
    const staleBefore = new Date(now.getTime() - WORKER_STALE_MS);
    const [{ n: workers }] = await db("workers").where({ device }).where("heartbeat_at", ">=", staleBefore).count({ n: "*" });
    const [{ n: expired }] = await db("training_jobs").where({ device, status: "running" }).where("lease_expires_at", "<", staleBefore).count({ n: "*" });
    const details = { queued: count("queued"), running: count("running"), live_workers: Number(workers), expired_leases: Number(expired) };
    const errors: string[] = [];
    if (details.expired_leases > 0) errors.push(`${details.expired_leases} running job(s) outlived their lease and were not taken back.`);
    if (details.queued > 0 && details.live_workers === 0) errors.push(`${details.queued} queued job(s) but no live ${device} worker.`);
    return { errors, details };
  });
}
