import { AppError, unsupported } from "../errors.js";
import type { ChatCompletion, ChatCompletionChunk, ChatCompletionRequest, Engine, GenerateOptions } from "./types.js";

export interface Upstream {
  /** Base URL of an OpenAI-compatible server, ending in `/v1`. */
  url: string;
  /** The model name the upstream knows. */
  model: string;
  /** Environment variable that holds the upstream's API key, if it needs one. */
  keyEnv?: string;
}

/** Forwards chat completions to an OpenAI-compatible engine (vLLM, SGLang, llama.cpp server), streams included. */
export class UpstreamEngine implements Engine {
  constructor(private readonly upstream: Upstream) {}

  async complete(request: ChatCompletionRequest, options: GenerateOptions = {}): Promise<ChatCompletion> {
    const res = await this.post({ ...request, stream: false }, options);
    return (await res.json()) as ChatCompletion;
  }

  async *stream(request: ChatCompletionRequest, options: GenerateOptions = {}): AsyncGenerator<ChatCompletionChunk> {
    const res = await this.post({ ...request, stream: true }, options);
    const decoder = new TextDecoder();
    let buffered = "";
    for await (const bytes of res.body as AsyncIterable<Uint8Array>) {
      buffered += decoder.decode(bytes, { stream: true });
      let end: number;
      while ((end = buffered.indexOf("\n")) >= 0) {
        const line = buffered.slice(0, end).trim();
        buffered = buffered.slice(end + 1);
        if (!line.startsWith("data:")) continue;
        const data = line.slice(5).trim();
        if (data === "[DONE]") return;
        yield JSON.parse(data) as ChatCompletionChunk;
      }
    }
  }

  async countPromptTokens(): Promise<number> {
    throw unsupported("Prompt token counts are not available for models served by an upstream engine.");
  }

  async close(): Promise<void> {}

  private async post(request: ChatCompletionRequest, options: GenerateOptions): Promise<Response> {
    if (options.lora) throw unsupported("Models served by an upstream engine cannot apply checkpoint adapters here.", "model");
    const key = this.upstream.keyEnv ? process.env[this.upstream.keyEnv] : undefined;
    let res: Response;
    try {
      res = await fetch(`${this.upstream.url}/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}) },
        body: JSON.stringify({ ...request, model: this.upstream.model }),
        signal: options.signal,
      });
    } catch (err) {
      if (options.signal?.aborted) throw err;
      throw new AppError("unavailable", `The upstream engine for this model is unreachable: ${(err as Error).message}`, undefined, "upstream_unreachable");
    }
    if (res.ok) return res;
    const detail = await res.text();
    const message = upstreamMessage(detail) ?? `status ${res.status}`;
    if (res.status === 429) throw new AppError("rate_limited", `The upstream engine is busy: ${message}`, undefined, "upstream_busy");
    if (res.status >= 500) throw new AppError("unavailable", `The upstream engine failed: ${message}`, undefined, "upstream_error");
    throw unsupported(`The upstream engine refused the request: ${message}`);
  }
}

function upstreamMessage(body: string): string | undefined {
  try {
    const parsed = JSON.parse(body) as { error?: { message?: string } | string; detail?: unknown; message?: string };
    if (typeof parsed.error === "object" && parsed.error?.message) return parsed.error.message;
    if (typeof parsed.error === "string") return parsed.error;
    if (typeof parsed.detail === "string") return parsed.detail;
    return parsed.message;
  } catch {
    return body.slice(0, 200) || undefined;
  }
}
