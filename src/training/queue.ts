import os from "node:os";
import type { Knex } from "knex";
import { dialectOf } from "../store/db.js";
import type { Device } from "../health/checks.js";
import { appendEvent } from "./events.js";
import type { JobRow } from "./jobs.js";

/** How many times a job is started before a lost worker fails it for good. */
export const MAX_ATTEMPTS = 3;

export interface Lease {
  jobId: string;
  workerId: string;
}

export async function registerWorker(db: Knex, workerId: string, device: Device): Promise<void> {
  const now = new Date();
  await db("workers")
    .insert({ id: workerId, device, host: os.hostname(), pid: process.pid, started_at: now, heartbeat_at: now })
    .onConflict("id")
    .merge({ heartbeat_at: now });
}

export async function unregisterWorker(db: Knex, workerId: string): Promise<void> {
  await db("workers").where({ id: workerId }).delete();
}

/**
 * Takes the oldest queued job that may run now: jobs of one model run in creation order, so a job waits while an
 * earlier job of its model is queued or running. On PostgreSQL the candidate row is locked with
 * `FOR UPDATE SKIP LOCKED`, so concurrent workers pass over each other's claims instead of waiting; on both
 * databases the update only matches a job still `queued`, so a job is never claimed twice.
 */
export async function claimJob(db: Knex, workerId: string, device: Device, leaseMs: number): Promise<JobRow | null> {
  return db.transaction(async (trx) => {
    const candidate = await nextRunnable(trx, device);
    if (!candidate) return null;
    const now = new Date();
    const claimed = await trx("training_jobs")
      .where({ id: candidate.id, status: "queued" })
      .update({
        status: "running",
        lease_owner: workerId,
        lease_expires_at: new Date(now.getTime() + leaseMs),
        attempts: trx.raw("attempts + 1"),
        started_at: trx.raw("coalesce(started_at, ?)", [now]),
      });
    return claimed === 1 ? ((await trx("training_jobs").where({ id: candidate.id }).first()) as JobRow) : null;
  });
}

async function nextRunnable(trx: Knex.Transaction, device: Device): Promise<{ id: string } | undefined> {
  const q = trx("training_jobs as j")
    .where({ "j.device": device, "j.status": "queued" })
    .whereNotExists(
      trx("training_jobs as e")
        .whereRaw("e.model_id = j.model_id")
        .where((w) => w.where("e.status", "running").orWhere((o) => o.where("e.status", "queued").whereRaw("e.seq < j.seq"))),
    )
    .orderBy("j.seq")
    .first("j.id");
  return dialectOf(trx) === "postgres" ? q.forUpdate().skipLocked() : q;
}

export interface HeartbeatResult {
  /** False when the job is no longer this worker's (lease lost, job deleted): stop without writing anything. */
  owned: boolean;
  cancelRequested: boolean;
}

/** Extends the lease of a running job and reports whether it should stop. */
export async function heartbeat(db: Knex, lease: Lease, leaseMs: number): Promise<HeartbeatResult> {
  const now = new Date();
  await db("workers").where({ id: lease.workerId }).update({ heartbeat_at: now });
  const n = await db("training_jobs")
    .where({ id: lease.jobId, status: "running", lease_owner: lease.workerId })
    .update({ lease_expires_at: new Date(now.getTime() + leaseMs) });
  if (n === 0) return { owned: false, cancelRequested: false };
  const row = await db("training_jobs").where({ id: lease.jobId }).first("cancel_requested");
  return { owned: true, cancelRequested: Boolean(row?.cancel_requested) };
}

/** Ends a running job, but only while this worker still holds it. */
export async function finishJob(
  db: Knex,
  lease: Lease,
  outcome: { status: "succeeded"; resultStep: number } | { status: "failed" | "cancelled"; error: string },
): Promise<boolean> {
  const n = await db("training_jobs")
    .where({ id: lease.jobId, status: "running", lease_owner: lease.workerId })
    .update({
      status: outcome.status,
      finished_at: new Date(),
      lease_owner: null,
      lease_expires_at: null,
      result_step: outcome.status === "succeeded" ? outcome.resultStep : null,
      error: outcome.status === "succeeded" ? null : outcome.error,
    });
  return n === 1;
}

/**
 * Running jobs whose lease ran out lost their worker. Each goes back to the queue to be started again, or, after
 * MAX_ATTEMPTS starts, fails with a `training_failed` event. Either way no job stays `running` without a worker.
 */
export async function recoverExpiredLeases(db: Knex, now = new Date()): Promise<{ requeued: number; failed: number }> {
  const expired: JobRow[] = await db("training_jobs").where({ status: "running" }).where("lease_expires_at", "<", now);
  let requeued = 0;
  let failed = 0;
  for (const job of expired) {
    const giveUp = Number(job.attempts) >= MAX_ATTEMPTS || Boolean(job.cancel_requested);
    const message = job.cancel_requested
      ? "Cancelled by request."
      : `The worker running this job stopped responding ${Number(job.attempts)} time(s); giving up.`;
    const n = await db("training_jobs")
      .where({ id: job.id, status: "running", lease_owner: job.lease_owner })
      .update(
        giveUp
          ? { status: job.cancel_requested ? "cancelled" : "failed", error: message, finished_at: now, lease_owner: null, lease_expires_at: null }
          : { status: "queued", lease_owner: null, lease_expires_at: null },
      );
    if (n !== 1) continue;
    if (giveUp) {
      failed++;
      await appendEvent(db, job.id, "training_failed", { error_message: message, ...(job.cancel_requested ? { cancelled: true } : {}) });
    } else {
      requeued++;
    }
  }
  return { requeued, failed };
}
