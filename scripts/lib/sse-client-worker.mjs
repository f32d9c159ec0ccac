/**
 * The inference benchmark's HTTP client, on its own thread: a real client never shares the server's event loop, and
 * reading SSE chunks on that loop would be counted as server overhead. Plain JavaScript, because a worker thread does
 * not get the main thread's TypeScript loader. Each message `{ id, url, apiKey, request }` runs one streamed chat
 * completion and answers `{ id, generation: { start, firstToken, end, tokens } }` (clock readings of this thread) or
 * `{ id, error }`.
 */
import { performance } from "node:perf_hooks";
import { parentPort } from "node:worker_threads";

async function run({ url, apiKey, request }) {
  const start = performance.now();
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify(request),
  });
  if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}: ${await response.text()}`);
  let firstToken = 0;
  let tokens = 0;
  let buffered = "";
  const decoder = new TextDecoder();
  for await (const bytes of response.body) {
    buffered += decoder.decode(bytes, { stream: true });
    let cut;
    while ((cut = buffered.indexOf("\n\n")) >= 0) {
      const event = buffered.slice(0, cut);
      buffered = buffered.slice(cut + 2);
      if (!event.startsWith("data: ") || event === "data: [DONE]") continue;
      const chunk = JSON.parse(event.slice(6));
      if (chunk.error) throw new Error(`stream failed: ${JSON.stringify(chunk.error)}`);
      if (!firstToken && chunk.choices[0]?.delta.content) firstToken = performance.now();
      if (chunk.usage) tokens = chunk.usage.completion_tokens;
    }
  }
  return { start, firstToken, end: performance.now(), tokens };
}

parentPort?.on("message", (job) => {
  run(job).then(
    (generation) => parentPort?.postMessage({ id: job.id, generation }),
    (err) => parentPort?.postMessage({ id: job.id, error: String(err) }),
  );
});
