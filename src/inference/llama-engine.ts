import { randomBytes, randomUUID } from "node:crypto";
import { access } from "node:fs/promises";
import {
  getLlama,
  LlamaGrammar,
  LlamaGrammarEvaluationState,
  TokenBias,
  type Llama,
  type LlamaContext,
  type LlamaContextSequence,
  type LlamaModel,
  type SequenceEvaluateOptions,
  type Token,
} from "node-llama-cpp";
import { notFound } from "../errors.js";
import { readGgufHeader } from "../gguf/reader.js";
import { Admission, type Release } from "./admission.js";
import { CacheEditGate } from "./cache-edit-gate.js";
import { CHATML_TOOLS_TEMPLATE } from "./chat-template.js";
import { renderChat } from "./chat-render.js";
import { GenerationAbortedError, InvalidRequestError, UnsupportedRequestError } from "./errors.js";
import { planRequest, type GenerationPlan } from "./request-plan.js";
import { IncrementalDetokenizer, StopMatcher, TokenBytes } from "./token-text.js";
import { parseToolCalls, templateUsesToolCallTags, TOOL_CALL_OPEN } from "./tool-calls.js";
import { ToolCallHoldback } from "./tool-holdback.js";
import { Utf8Guard, Utf8TokenFilter } from "./utf8-token-filter.js";
import type {
  ChatCompletion,
  ChatCompletionChoice,
  ChatCompletionChunk,
  ChatCompletionRequest,
  ChatToolCall,
  ChoiceLogprobs,
  Engine,
  FinishReason,
  GenerateOptions,
  TokenLogprob,
} from "./types.js";

export interface LlamaEngineOptions {
  modelPath: string;
  /** Sequences per context, i.e. generations decoded together in one batch. Default 4. */
  parallel?: number;
  /** Generations that may wait for a sequence before requests are refused. Default 32. */
  maxQueue?: number;
  /** Tokens per sequence. Default: the model's training context, at most 4096. */
  contextSize?: number;
  batchSize?: number;
  /** Contexts kept at once (the base model's and one per LoRA adapter in use). Default 3. */
  maxContexts?: number;
  /** "auto" uses CUDA, Vulkan or Metal where present. */
  gpu?: "auto" | false;
  threads?: number;
  /** Share one llama.cpp instance between engines. */
  llama?: Llama;
}

/** What a model registry shows about the loaded model. */
export interface LlamaModelInfo {
  architecture: string;
  name?: string;
  /** Context the model was trained with. */
  trainContextSize: number;
  /** Tokens each sequence of this engine holds (prompt plus completion). */
  contextSize: number;
  vocabSize: number;
  parameters: number;
}

interface ContextEntry {
  context: LlamaContext;
  gate: CacheEditGate;
  free: LlamaContextSequence[];
  active: number;
  lastUsed: number;
  base: boolean;
}

interface PreparedRequest {
  id: string;
  created: number;
  model: string;
  plan: GenerationPlan;
  promptTokens: Token[];
  grammar?: LlamaGrammar;
  toolNames: Set<string>;
}

type LogprobEntry = ChoiceLogprobs["content"][number];

/** What one choice streams out as it generates. */
interface ChoiceEvent {
  index: number;
  content: string;
  logprobs: LogprobEntry[];
}

interface ChoiceOutcome {
  index: number;
  content: string | null;
  toolCalls: ChatToolCall[];
  logprobs: LogprobEntry[];
  finish: FinishReason;
  completionTokens: number;
}

/** Shape of the per-token output of evaluateWithMetadata whichever metadata was asked for. */
interface EvaluatedToken {
  token: Token;
  confidence?: number;
  probabilities?: Map<Token, number>;
}

/** llama.cpp (through node-llama-cpp) behind the OpenAI chat-completions shapes. */
export class LlamaEngine implements Engine {
  private readonly contexts = new Map<string, Promise<ContextEntry>>();
  private readonly admission: Admission;
  private utf8Filter?: Utf8TokenFilter;
  private closed = false;

  private constructor(
    private readonly llama: Llama,
    private readonly ownsLlama: boolean,
    readonly model: LlamaModel,
    private readonly chatTemplate: string,
    private readonly tokenBytes: TokenBytes,
    readonly info: LlamaModelInfo,
    private readonly options: Required<Pick<LlamaEngineOptions, "parallel" | "maxQueue" | "contextSize" | "maxContexts">> &
      Pick<LlamaEngineOptions, "batchSize" | "threads">,
  ) {
    this.admission = new Admission(options.parallel, options.maxQueue);
  }

  static async load(options: LlamaEngineOptions): Promise<LlamaEngine> {
    await access(options.modelPath).catch(() => {
      throw notFound(`model file ${options.modelPath} does not exist`, "model_not_found");
    });
    const header = await readGgufHeader(options.modelPath);
    const llama = options.llama ?? (await getLlama({ gpu: options.gpu ?? "auto" }));
    const model = await llama.loadModel({ modelPath: options.modelPath });
    const template = header.metadata["tokenizer.chat_template"];
    const tokenizerModel = header.metadata["tokenizer.ggml.model"];
    const vocab = header.metadata["tokenizer.ggml.tokens"];
    if (!Array.isArray(vocab)) throw new Error(`${options.modelPath} has no tokenizer.ggml.tokens vocabulary`);
    const tokenBytes = new TokenBytes(
      model,
      typeof tokenizerModel === "string" ? tokenizerModel : "",
      vocab.map(String),
    );
    const contextSize = options.contextSize ?? Math.min(model.trainContextSize, 4096);
    return new LlamaEngine(
      llama,
      options.llama === undefined,
      model,
      // Like llama.cpp's server, a model without a template is spoken to in ChatML.
      typeof template === "string" && template.length ? template : CHATML_TOOLS_TEMPLATE,
      tokenBytes,
      {
        architecture: String(header.metadata["general.architecture"] ?? "unknown"),
        name: typeof header.metadata["general.name"] === "string" ? header.metadata["general.name"] : undefined,
        trainContextSize: model.trainContextSize,
        contextSize,
        vocabSize: vocab.length,
        parameters: header.tensors.reduce((sum, t) => sum + t.dims.reduce((a, b) => a * b, 1), 0),
      },
      {
        parallel: options.parallel ?? 4,
        maxQueue: options.maxQueue ?? 32,
        contextSize,
        maxContexts: options.maxContexts ?? 3,
        batchSize: options.batchSize,
        threads: options.threads,
      },
    );
  }

  /** Generations running and waiting, for metrics and tests. */
  get activity(): { active: number; queued: number } {
    return { active: this.admission.active, queued: this.admission.queued };
  }

  /** The chat template prompts are rendered with. */
  get template(): string {
    return this.chatTemplate;
  }

  async countPromptTokens(request: ChatCompletionRequest): Promise<number> {
    const plan = planRequest(request, this.info.vocabSize);
    return this.tokenizePrompt(request, plan).length;
  }

  async complete(request: ChatCompletionRequest, options: GenerateOptions = {}): Promise<ChatCompletion> {
    const job = await this.prepare(request);
    const slots = this.admission.admit(job.plan.n, options.signal);
    const outcomes = await this.runChoices(job, slots, options, () => undefined);
    const choices: ChatCompletionChoice[] = outcomes.map((o) => ({
      index: o.index,
      message: { role: "assistant", content: o.content, ...(o.toolCalls.length ? { tool_calls: o.toolCalls } : {}) },
      logprobs: job.plan.logprobs ? { content: o.logprobs } : null,
      finish_reason: o.finish,
    }));
    return {
      id: job.id,
      object: "chat.completion",
      created: job.created,
      model: job.model,
      choices,
      usage: this.usage(job, outcomes),
    };
  }

  /**
   * Validation, context-length and queue-full errors are thrown by the first `next()`, before any chunk, so a caller can
   * still answer with an error status.
   */
  async *stream(request: ChatCompletionRequest, options: GenerateOptions = {}): AsyncGenerator<ChatCompletionChunk> {
    const job = await this.prepare(request);
    const chunk = (choices: ChatCompletionChunk["choices"], usage?: ChatCompletionChunk["usage"]): ChatCompletionChunk => ({
      id: job.id,
      object: "chat.completion.chunk",
      created: job.created,
      model: job.model,
      choices,
      ...(usage !== undefined ? { usage } : {}),
    });
    // A consumer that stops reading cancels the generations, like a client that disconnects.
    const cancel = new AbortController();
    const signal = options.signal ? AbortSignal.any([options.signal, cancel.signal]) : cancel.signal;
    const slots = this.admission.admit(job.plan.n, signal);
    const pending: ChatCompletionChunk[] = [];
    let wake: (() => void) | undefined;
    const notify = (): void => {
      wake?.();
      wake = undefined;
    };
    for (let i = 0; i < job.plan.n; i++) {
      pending.push(chunk([{ index: i, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }]));
    }
    let outcomes: ChoiceOutcome[] | undefined;
    let failure: unknown;
    const run = this.runChoices(job, slots, { ...options, signal }, (event) => {
      if (!event.content && !event.logprobs.length) return;
      pending.push(
        chunk([
          {
            index: event.index,
            delta: { content: event.content },
            logprobs: job.plan.logprobs ? { content: event.logprobs } : null,
            finish_reason: null,
          },
        ]),
      );
      notify();
    }).then(
      (result) => {
        outcomes = result;
        notify();
      },
      (err: unknown) => {
        failure = err;
        notify();
      },
    );
    try {
      while (true) {
        while (pending.length) yield pending.shift() as ChatCompletionChunk;
        if (failure !== undefined) throw failure;
        if (outcomes) break;
        await new Promise<void>((resolve) => {
          wake = resolve;
          if (pending.length || outcomes || failure !== undefined) notify();
        });
      }
      for (const o of outcomes) {
        if (o.toolCalls.length) {
          yield chunk([
            {
              index: o.index,
              delta: { tool_calls: o.toolCalls.map((c, k) => ({ index: k, ...c })) },
              logprobs: null,
              finish_reason: null,
            },
          ]);
        }
        yield chunk([{ index: o.index, delta: {}, logprobs: null, finish_reason: o.finish }]);
      }
      if (job.plan.includeUsage) yield chunk([], this.usage(job, outcomes));
    } finally {
      cancel.abort();
      await run;
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const entry of this.contexts.values()) await (await entry.catch(() => undefined))?.context.dispose();
    this.contexts.clear();
    await this.model.dispose();
    if (this.ownsLlama) await this.llama.dispose();
  }

  private usage(job: PreparedRequest, outcomes: ChoiceOutcome[]): ChatCompletion["usage"] {
    const completion = outcomes.reduce((s, o) => s + o.completionTokens, 0);
    return { prompt_tokens: job.promptTokens.length, completion_tokens: completion, total_tokens: job.promptTokens.length + completion };
  }

  private tokenizePrompt(request: ChatCompletionRequest, plan: GenerationPlan): Token[] {
    if ((plan.parseToolCalls || plan.constraint.kind === "tool_call") && !templateUsesToolCallTags(this.chatTemplate)) {
      throw new UnsupportedRequestError(
        `this model's chat template does not write tool calls as ${TOOL_CALL_OPEN} blocks, the syntax this server parses`,
        "tools",
      );
    }
    let text: string;
    try {
      text = renderChat(this.chatTemplate, {
        messages: request.messages,
        tools: plan.tools,
        addGenerationPrompt: true,
        bosToken: this.model.tokens.bosString ?? "",
        eosToken: this.model.tokens.eosString ?? "",
        extra: request.chat_template_kwargs ?? undefined,
      });
    } catch (err) {
      throw new InvalidRequestError(`the chat template could not render these messages: ${(err as Error).message}`, "messages");
    }
    const tokens = this.model.tokenize(text, true);
    const bos = this.model.tokens.bos;
    if (this.model.tokens.shouldPrependBosToken && bos !== null && tokens[0] !== bos) tokens.unshift(bos);
    return tokens;
  }

  private async prepare(request: ChatCompletionRequest): Promise<PreparedRequest> {
    if (this.closed) throw new Error("engine is closed");
    const plan = planRequest(request, this.info.vocabSize);
    for (const token of plan.sampling.logitBias.keys()) {
      // llama.cpp's sampler leaves end-of-generation tokens out of token biases; refuse rather than ignore the bias.
      if (this.model.isEogToken(token as Token)) {
        throw new UnsupportedRequestError(`logit_bias cannot change token ${token}: it ends the generation, and this engine cannot bias it`, "logit_bias");
      }
    }
    const promptTokens = this.tokenizePrompt(request, plan);
    if (promptTokens.length >= this.options.contextSize - 1) {
      throw new InvalidRequestError(
        `the prompt is ${promptTokens.length} tokens; this model's context holds ${this.options.contextSize}`,
        "messages",
        "context_length_exceeded",
      );
    }
    return {
      id: `chatcmpl-${randomUUID().replace(/-/g, "")}`,
      created: Math.floor(Date.now() / 1000),
      model: request.model,
      plan,
      promptTokens,
      grammar: await this.grammarFor(plan),
      toolNames: new Set(plan.tools.map((t) => t.function.name)),
    };
  }

  private async grammarFor(plan: GenerationPlan): Promise<LlamaGrammar | undefined> {
    const c = plan.constraint;
    if (c.kind === "none") return undefined;
    try {
      return await this.llama.createGrammar({ grammar: c.grammar });
    } catch (err) {
      // The compiler cannot see everything llama.cpp rejects, e.g. $ref cycles that produce no character (left recursion).
      throw new UnsupportedRequestError(
        `llama.cpp refused the grammar of this ${c.kind === "tool_call" ? "tool schema" : "JSON schema"}: ${(err as Error).message}`,
        c.kind === "tool_call" ? "tools" : "response_format",
      );
    }
  }

  /** Built on first use: it walks the whole vocabulary. */
  private utf8(): Utf8TokenFilter {
    this.utf8Filter ??= new Utf8TokenFilter(this.model, this.info.vocabSize, (t) => this.tokenBytes.bytes(t));
    return this.utf8Filter;
  }

  private async contextFor(lora: GenerateOptions["lora"]): Promise<ContextEntry> {
    const key = lora ? `${lora.path}\u0000${lora.scale ?? 1}` : "";
    let entry = this.contexts.get(key);
    if (!entry) {
      await this.evictIdleContexts();
      entry = this.createContext(lora);
      this.contexts.set(key, entry);
      entry.catch(() => this.contexts.delete(key));
    }
    const resolved = await entry;
    resolved.lastUsed = Date.now();
    return resolved;
  }

  private async createContext(lora: GenerateOptions["lora"]): Promise<ContextEntry> {
    if (lora) {
      await access(lora.path).catch(() => {
        throw notFound(`LoRA adapter ${lora.path} does not exist`, "adapter_not_found");
      });
    }
    const context = await this.model.createContext({
      contextSize: this.options.contextSize,
      sequences: this.options.parallel,
      batchSize: this.options.batchSize,
      threads: this.options.threads,
      ...(lora ? { lora: { adapters: [{ filePath: lora.path, scale: lora.scale ?? 1 }] } } : {}),
    });
    const free: LlamaContextSequence[] = [];
    for (let i = 0; i < this.options.parallel; i++) free.push(context.getSequence());
    return { context, gate: new CacheEditGate(), free, active: 0, lastUsed: Date.now(), base: !lora };
  }

  /** Keeps at most maxContexts contexts by disposing the least recently used idle adapter contexts. */
  private async evictIdleContexts(): Promise<void> {
    while (this.contexts.size >= this.options.maxContexts) {
      let victim: { key: string; entry: ContextEntry } | undefined;
      for (const [key, promise] of this.contexts) {
        const entry = await promise.catch(() => undefined);
        if (!entry || entry.base || entry.active > 0) continue;
        if (!victim || entry.lastUsed < victim.entry.lastUsed) victim = { key, entry };
      }
      if (!victim) return;
      this.contexts.delete(victim.key);
      await victim.entry.context.dispose();
    }
  }

  private async runChoices(
    job: PreparedRequest,
    slots: Promise<Release>[],
    options: GenerateOptions,
    onEvent: (event: ChoiceEvent) => void,
  ): Promise<ChoiceOutcome[]> {
    const baseSeed = job.plan.sampling.seed ?? randomBytes(4).readUInt32LE(0);
    const results = await Promise.allSettled(
      slots.map(async (slot, index) => {
        const release = await slot;
        try {
          return await this.runChoice(job, index, (baseSeed + index) % 2 ** 32, options, onEvent);
        } finally {
          release();
        }
      }),
    );
    const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
    if (failed) throw failed.reason;
    return results.map((r) => (r as PromiseFulfilledResult<ChoiceOutcome>).value);
  }

  private async runChoice(
    job: PreparedRequest,
    index: number,
    seed: number,
    options: GenerateOptions,
    onEvent: (event: ChoiceEvent) => void,
  ): Promise<ChoiceOutcome> {
    if (options.signal?.aborted) throw new GenerationAbortedError();
    const entry = await this.contextFor(options.lora);
    const sequence = entry.free.pop();
    if (!sequence) throw new Error("no free sequence although a slot was granted");
    entry.active++;
    try {
      return await this.generate(job, index, seed, sequence, entry.gate, options.signal, onEvent);
    } finally {
      entry.active--;
      entry.lastUsed = Date.now();
      entry.free.push(sequence);
    }
  }

  private async generate(
    job: PreparedRequest,
    index: number,
    seed: number,
    sequence: LlamaContextSequence,
    gate: CacheEditGate,
    signal: AbortSignal | undefined,
    onEvent: (event: ChoiceEvent) => void,
  ): Promise<ChoiceOutcome> {
    const { plan, promptTokens } = job;
    const room = sequence.contextSize - promptTokens.length - 1;
    const maxTokens = Math.min(plan.maxTokens ?? room, room);

    // Reuse the cached prefix the sequence already holds; at least one prompt token is evaluated to get logits.
    const keep = Math.min(sequence.compareContextTokens(promptTokens).firstDifferentIndex, promptTokens.length - 1);
    if (keep < sequence.nextTokenIndex) {
      await gate.edit(() => sequence.eraseContextTokenRanges([{ start: keep, end: sequence.nextTokenIndex }]));
    }

    const generated: Token[] = [];
    const s = plan.sampling;
    // Grammar-constrained output must also be well-formed UTF-8 for the grammar's characters to be the output's.
    const utf8 = job.grammar ? new Utf8Guard(this.utf8(), s.logitBias) : undefined;
    let tokenBias: TokenBias | (() => TokenBias) | undefined;
    if (utf8) {
      tokenBias = utf8.tokenBias;
    } else if (s.logitBias.size) {
      const fixed = new TokenBias(this.model.tokenizer);
      for (const [token, bias] of s.logitBias) fixed.set(token as Token, { logit: bias });
      tokenBias = fixed;
    }
    const evaluateOptions: SequenceEvaluateOptions = {
      temperature: s.temperature,
      topK: s.topK,
      topP: s.topP,
      minP: s.minP,
      seed,
      tokenBias,
      yieldEogToken: true,
      grammarEvaluationState: job.grammar ? new LlamaGrammarEvaluationState({ model: this.model, grammar: job.grammar }) : undefined,
      // OpenAI penalties count the tokens generated so far.
      repeatPenalty: s.penalties
        ? {
            punishTokens: () => generated,
            maxPunishTokens: Math.max(64, maxTokens),
            penalty: s.penalties.repetition,
            frequencyPenalty: s.penalties.frequency,
            presencePenalty: s.penalties.presence,
          }
        : undefined,
    };

    const detokenizer = new IncrementalDetokenizer(this.model, !plan.skipSpecialTokens);
    const stops = new StopMatcher(plan.stop);
    const holdback = plan.parseToolCalls ? new ToolCallHoldback() : undefined;
    const logprobs: LogprobEntry[] = [];
    let text = "";
    let finish: FinishReason = "length";
    let pendingLogprobs: LogprobEntry[] = [];
    const deliver = (piece: string): void => {
      text += piece;
      const content = holdback ? holdback.push(piece) : piece;
      if (content || pendingLogprobs.length) onEvent({ index, content, logprobs: pendingLogprobs });
      pendingLogprobs = [];
    };

    const outputs = gate.throttle(
      sequence.evaluateWithMetadata(
        promptTokens.slice(keep),
        { confidence: plan.logprobs, probabilities: plan.topLogprobs > 0 },
        evaluateOptions,
      ) as AsyncGenerator<EvaluatedToken, void, void>,
    );
    let stopped = false;
    for await (const out of outputs) {
      if (signal?.aborted) throw new GenerationAbortedError();
      generated.push(out.token);
      if (plan.logprobs) {
        const entry = this.logprobEntry(out, plan);
        logprobs.push(entry);
        pendingLogprobs.push(entry);
      }
      if (this.model.isEogToken(out.token)) {
        finish = "stop";
        break;
      }
      utf8?.accept(out.token);
      const step = stops.push(detokenizer.push(out.token));
      deliver(step.emit);
      if (step.stopped) {
        stopped = true;
        finish = "stop";
        break;
      }
      if (generated.length >= maxTokens) break;
    }
    if (!stopped) {
      const step = stops.push(detokenizer.flush());
      deliver(step.emit + (step.stopped ? "" : stops.flush()));
      if (step.stopped) finish = "stop";
    }
    if (signal?.aborted) throw new GenerationAbortedError();

    let content: string | null = text;
    let toolCalls: ChatToolCall[] = [];
    if (plan.parseToolCalls) {
      const parsed = parseToolCalls(text, job.toolNames);
      const calls = plan.parallelToolCalls ? parsed.calls : parsed.calls.slice(0, 1);
      toolCalls = calls.map((c) => ({
        id: `call_${randomUUID().replace(/-/g, "").slice(0, 24)}`,
        type: "function",
        function: { name: c.name, arguments: c.arguments },
      }));
      content = parsed.content;
      // Streamed content stopped at the first tag; what followed it that is not a call still has to go out.
      if (holdback) {
        const rest = parseToolCalls(holdback.held(), job.toolNames).content;
        if (rest) onEvent({ index, content: rest, logprobs: [] });
      }
      if (toolCalls.length && finish === "stop") finish = "tool_calls";
    }
    return { index, content, toolCalls, logprobs, finish, completionTokens: generated.length };
  }

  /**
   * Log-probabilities of the distribution llama.cpp sampled the token from: the model's logits after logit_bias and
   * penalties, scaled by the temperature and cut by top_k/top_p/min_p (the temperature-1 softmax for greedy decoding).
   * With temperature 1 and no truncation they are the model's raw log-probabilities.
   */
  private logprobEntry(out: EvaluatedToken, plan: GenerationPlan): LogprobEntry {
    const describe = (token: Token, probability: number): TokenLogprob => ({
      token: plan.tokensAsIds ? `token_id:${token}` : this.model.detokenize([token], true),
      logprob: probability > 0 ? Math.log(probability) : -9999,
      bytes: this.tokenBytes.bytes(token),
    });
    const probability = out.confidence ?? out.probabilities?.get(out.token) ?? 0;
    const top: TokenLogprob[] = [];
    if (out.probabilities) {
      for (const [token, p] of out.probabilities) {
        if (top.length >= plan.topLogprobs) break;
        top.push(describe(token, p));
      }
    }
    return { ...describe(out.token, probability), top_logprobs: top };
  }
}
