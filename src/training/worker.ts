import { randomBytes } from "node:crypto";
import { mkdir, rename } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Knex } from "knex";
import type { Device } from "../health/checks.js";
import type { Logger } from "../logging.js";
import { addCheckpoint, findCheckpoint } from "./checkpoints.js";
import { appendEvent } from "./events.js";
import { trainingPaths } from "./files.js";
import { CANCELLED_MESSAGE, type JobRow } from "./jobs.js";
import { claimJob, finishJob, heartbeat, recoverExpiredLeases, registerWorker, unregisterWorker, type Lease } from "./queue.js";

/** What running one job produced: the new adapter (a file the executor wrote) and the final metrics. */
export interface JobResult {
  adapterFile: string;
  metrics: Record<string, number>;
}

export interface JobProgress {
  started(data: { num_sequences: number } & Record<string, unknown>): Promise<void>;
  step(metrics: Record<string, number>): Promise<void>;
}

/** Runs the training of one claimed job; stops early when `signal` aborts. */
export type JobExecutor = (job: JobRow, progress: JobProgress, signal: AbortSignal) => Promise<JobResult>;

export interface WorkerOptions {
  dataDir: string;
  device: Device;
  executor: JobExecutor;
  logger: Logger;
  /** A job's lease lasts this long unless renewed by a heartbeat (every third of it). */
  leaseMs?: number;
  /** How often an idle worker looks for work. */
  pollMs?: number;
}

/**
 * Takes queued jobs from the store and runs them one at a time. The same loop runs inside `gyre serve` and as
 * `gyre worker`; several workers may share one store.
 */
export class TrainingWorker {
  readonly id = `${os.hostname()}:${process.pid}:${randomBytes(3).toString("hex")}`;
  private stopping = false;
  private loop?: Promise<void>;
  private wake?: () => void;
  private current?: AbortController;
  private readonly leaseMs: number;
  private readonly pollMs: number;

  constructor(
    private readonly db: Knex,
    private readonly options: WorkerOptions,
  ) {
    this.leaseMs = options.leaseMs ?? 30_000;
    this.pollMs = options.pollMs ?? 1_000;
  }

  async start(): Promise<void> {
    await registerWorker(this.db, this.id, this.options.device);
    this.loop = this.run();
  }

  /** Stops taking work; a job in progress is interrupted and goes back to the queue for another worker. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.current?.abort(new Error("worker stopping"));
    this.wake?.();
    await this.loop;
    await unregisterWorker(this.db, this.id);
  }

  private async run(): Promise<void> {
    while (!this.stopping) {
      try {
        await registerWorker(this.db, this.id, this.options.device);
        await recoverExpiredLeases(this.db);
        const job = await claimJob(this.db, this.id, this.options.device, this.leaseMs);
        if (job) {
          await this.runJob(job);
          continue;
        }
      } catch (err) {
        this.options.logger.error({ worker: this.id, err: { message: (err as Error).message } }, "worker loop error");
      }
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        setTimeout(resolve, this.pollMs).unref();
      });
    }
  }

  private async runJob(job: JobRow): Promise<void> {
    const lease: Lease = { jobId: job.id, workerId: this.id };
    const { logger } = this.options;
    const controller = new AbortController();
    this.current = controller;
    let lost = false;
    let cancelled = false;
    const beat = setInterval(() => {
      heartbeat(this.db, lease, this.leaseMs)
        .then((h) => {
          if (!h.owned) {
            lost = true;
            controller.abort(new Error("lease lost"));
          } else if (h.cancelRequested) {
            cancelled = true;
            controller.abort(new Error(CANCELLED_MESSAGE));
          }
        })
        .catch((err: Error) => logger.warn({ job: job.id, err: { message: err.message } }, "heartbeat failed"));
    }, Math.max(100, Math.floor(this.leaseMs / 3)));
    logger.info({ job: job.id, kind: job.kind, model: job.model_id, attempt: job.attempts }, "job started");
    try {
      const progress: JobProgress = {
        started: (data) => appendEvent(this.db, job.id, "training_started", data),
        step: (metrics) => appendEvent(this.db, job.id, "gradient_step", metrics),
      };
      const result = await this.options.executor(job, progress, controller.signal);
      if (controller.signal.aborted) throw controller.signal.reason;
      await this.complete(lease, job, result);
      logger.info({ job: job.id }, "job succeeded");
    } catch (err) {
      const message = (err as Error).message ?? String(err);
      if (lost || this.stopping) {
        // Someone else owns the job now, or it was deleted, or this process is going away: the lease decides.
        if (this.stopping && !lost) await this.release(lease);
        logger.warn({ job: job.id, reason: message }, "job interrupted");
      } else if (cancelled) {
        if (await finishJob(this.db, lease, { status: "cancelled", error: CANCELLED_MESSAGE })) {
          await appendEvent(this.db, job.id, "training_failed", { error_message: CANCELLED_MESSAGE, cancelled: true });
        }
        logger.info({ job: job.id }, "job cancelled");
      } else {
        if (await finishJob(this.db, lease, { status: "failed", error: message })) {
          await appendEvent(this.db, job.id, "training_failed", { error_message: message });
        }
        logger.error({ job: job.id, err: { message } }, "job failed");
      }
    } finally {
      clearInterval(beat);
      this.current = undefined;
    }
  }

  /** The adapter becomes checkpoint N+1 of the model, and the job succeeds, in that order. */
  private async complete(lease: Lease, job: JobRow, result: JobResult): Promise<void> {
    const latest = await findCheckpoint(this.db, this.options.dataDir, job.model_id);
    const step = (latest?.step ?? 0) + 1;
    const relative = trainingPaths.adapter(job.model_id, step);
    const target = path.join(this.options.dataDir, relative);
    await mkdir(path.dirname(target), { recursive: true });
    await rename(result.adapterFile, target);
    await this.db.transaction(async (trx) => {
      await addCheckpoint(trx, { modelId: job.model_id, step, metrics: result.metrics, adapterPath: relative, jobId: job.id });
      const ok = await finishJob(trx, lease, { status: "succeeded", resultStep: step });
      if (!ok) throw new Error("lease lost before the checkpoint was recorded");
      await appendEvent(trx, job.id, "training_ended", { ...result.metrics, step });
    });
  }

  /** Hands a job back to the queue at once, instead of waiting for its lease to run out; a clean stop is no failed attempt. */
  private async release(lease: Lease): Promise<void> {
    await this.db("training_jobs")
      .where({ id: lease.jobId, status: "running", lease_owner: lease.workerId })
      .update({ status: "queued", lease_owner: null, lease_expires_at: null, attempts: this.db.raw("attempts - 1") });
  }
}
