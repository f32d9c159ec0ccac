/**
 * Lets a sequence edit its KV cache while the other sequences of its context keep generating.
 *
 * node-llama-cpp decodes batches under the context's lock and keeps the lock for as long as any sequence has a decode
 * queued; erasing a sequence's cached tokens needs the same lock. Under steady load the streams always have a decode
 * queued, so an erase (a new prompt landing on a used sequence) would wait until every other stream had finished.
 * Closing the gate holds back the streams' next decodes: the batches already queued finish, the lock is released, the
 * edit runs, and the streams resume — a pause of about one batch instead of the length of the longest stream.
 */
export class CacheEditGate {
  private editors = 0;
  private opened: Promise<void> = Promise.resolve();
  private open: () => void = () => undefined;

  /** Runs `edit` with the gate closed; streams wait at `pass()` until every concurrent edit is done. */
  async edit<T>(edit: () => Promise<T>): Promise<T> {
    if (this.editors++ === 0) this.opened = new Promise((resolve) => (this.open = resolve));
    try {
      return await edit();
    } finally {
      if (--this.editors === 0) this.open();
    }
  }

  /** Resolves at once while no edit is waiting, else when the edits are done. */
  pass(): Promise<void> {
    return this.editors === 0 ? Promise.resolve() : this.opened;
  }

  /** Pulls from `tokens` one item at a time, waiting at the gate before each pull (each pull queues a decode). */
  async *throttle<T>(tokens: AsyncGenerator<T, void, void>): AsyncGenerator<T, void, void> {
    try {
      while (true) {
        await this.pass();
        const next = await tokens.next();
        if (next.done) return;
        yield next.value;
      }
    } finally {
      // An early stop by the consumer must still end the inner generation and free its sampler.
      await tokens.return();
    }
  }
}
