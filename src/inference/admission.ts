import { GenerationAbortedError, QueueFullError } from "./errors.js";

export type Release = () => void;

interface Waiter {
  grant: (release: Release) => void;
}

/**
 * Bounded admission: at most `slots` generations run at once (one per context sequence) and at most `maxWaiting` more
 * wait, first come first served. A request that does not fit is refused at once rather than queued without bound.
 */
export class Admission {
  private running = 0;
  private readonly waiting: Waiter[] = [];

  constructor(readonly slots: number, readonly maxWaiting: number) {}

  get active(): number {
    return this.running;
  }

  get queued(): number {
    return this.waiting.length;
  }

  /** Admits `count` generations together (all or none); each promise resolves when that generation may run. */
  admit(count: number, signal?: AbortSignal): Promise<Release>[] {
    if (this.running + this.waiting.length + count > this.slots + this.maxWaiting) throw new QueueFullError();
    if (signal?.aborted) throw new GenerationAbortedError();
    return Array.from({ length: count }, () => this.acquire(signal));
  }

  private acquire(signal?: AbortSignal): Promise<Release> {
    if (this.running < this.slots) {
      this.running++;
      return Promise.resolve(this.releaser());
    }
    return new Promise<Release>((resolve, reject) => {
      const onAbort = (): void => {
        const i = this.waiting.indexOf(waiter);
        if (i >= 0) this.waiting.splice(i, 1);
        reject(new GenerationAbortedError());
      };
      const waiter: Waiter = {
        grant: (release) => {
          signal?.removeEventListener("abort", onAbort);
          resolve(release);
        },
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiting.push(waiter);
    });
  }

  private releaser(): Release {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.shift();
      if (next) next.grant(this.releaser());
      else this.running--;
    };
  }
}
