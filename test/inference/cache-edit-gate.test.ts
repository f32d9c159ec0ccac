import { describe, expect, it } from "vitest";
import { CacheEditGate } from "../../src/inference/cache-edit-gate.js";

/** A token source that records each pull, like a sequence queueing a decode per token. */
function source(pulls: string[], onEnd: () => void): AsyncGenerator<number, void, void> {
  return (async function* () {
    try {
      for (let i = 0; ; i++) {
        pulls.push(`pull ${i}`);
        yield i;
      }
    } finally {
      onEnd();
    }
  })();
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe("CacheEditGate", () => {
  it("holds back pulls while an edit waits and lets them go when every edit is done", async () => {
    const gate = new CacheEditGate();
    const log: string[] = [];
    let ended = false;
    const tokens = gate.throttle(source(log, () => (ended = true)));
    expect((await tokens.next()).value).toBe(0);

    let finishFirst!: () => void;
    let finishSecond!: () => void;
    const first = gate.edit(() => new Promise<void>((resolve) => (finishFirst = () => (log.push("edit 1"), resolve()))));
    const second = gate.edit(() => new Promise<void>((resolve) => (finishSecond = () => (log.push("edit 2"), resolve()))));
    const held = tokens.next();
    await tick();
    expect(log).toEqual(["pull 0"]);
    finishFirst();
    await first;
    await tick();
    expect(log).toEqual(["pull 0", "edit 1"]);
    finishSecond();
    await second;
    expect((await held).value).toBe(1);
    expect(log).toEqual(["pull 0", "edit 1", "edit 2", "pull 1"]);

    await tokens.return();
    expect(ended).toBe(true);
  });

  it("reopens after a failed edit and ends the source when the consumer stops early", async () => {
    const gate = new CacheEditGate();
    await expect(gate.edit(() => Promise.reject(new Error("no")))).rejects.toThrow("no");
    await gate.pass();
    let ended = false;
    const seen: number[] = [];
    for await (const token of gate.throttle(source([], () => (ended = true)))) {
      seen.push(token);
      if (seen.length === 3) break;
    }
    expect(seen).toEqual([0, 1, 2]);
    expect(ended).toBe(true);
  });
});
