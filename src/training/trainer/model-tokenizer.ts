import { getLlama, LlamaLogLevel, type Llama, type LlamaModel, type Token } from "node-llama-cpp";
import { readGgufHeader } from "../../gguf/reader.js";
import { templateRenderer, type ChatRenderer } from "./chat-render.js";
import type { ChatTokenizer } from "./chat-tokens.js";

export interface ModelChat {
  tokenizer: ChatTokenizer;
  renderer: ChatRenderer;
  /** Tokens the model was trained to attend over; longer training sequences are cut to it. */
  contextLength: number;
  dispose(): Promise<void>;
}

let llama: Promise<Llama> | undefined;

function cpuLlama(): Promise<Llama> {
  // The trainer needs only the vocabulary; no GPU and no native rebuild.
  llama ??= getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
  return llama;
}

/** The model's own tokenizer (llama.cpp, vocabulary only) and its GGUF chat template. */
export async function openModelChat(modelPath: string): Promise<ModelChat> {
  const header = await readGgufHeader(modelPath);
  const template = header.metadata["tokenizer.chat_template"];
  if (typeof template !== "string") throw new Error(`${modelPath} has no tokenizer.chat_template; cannot render conversations`);
  const model: LlamaModel = await (await cpuLlama()).loadModel({ modelPath, vocabOnly: true });
  const tokenizer: ChatTokenizer = {
    tokenize: (text) => model.tokenize(text, true).map(Number),
    detokenize: (tokens) => model.detokenize(tokens as Token[], true),
    isEndOfGeneration: (token) => model.isEogToken(token as Token),
    bos: model.tokens.bos === null ? null : Number(model.tokens.bos),
    prependBos: model.tokens.shouldPrependBosToken,
  };
  const renderer = templateRenderer(template, {
    bosToken: model.tokens.bosString ?? "",
    eosToken: model.tokens.eosString ?? "",
  });
  return { tokenizer, renderer, contextLength: model.trainContextSize > 0 ? model.trainContextSize : Number.POSITIVE_INFINITY, dispose: () => model.dispose() };
}
