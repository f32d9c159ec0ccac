import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getLlama, readGgufFileInfo, type Llama } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readGgufHeader } from "../src/gguf/reader.js";
import { renderChat, toTemplateMessages } from "../src/inference/chat-render.js";
import { buildTinyModel, tinyModelContents } from "../src/inference/tiny-model.js";
import { tinyModelPath } from "./helpers/tiny-model.js";

let dir: string;
let llama: Llama;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "tiny-model-test-"));
  llama = await getLlama({ gpu: false });
});
afterAll(async () => {
  await llama?.dispose();
  await rm(dir, { recursive: true, force: true });
});

/** llama.cpp's own Jinja engine, which node-llama-cpp binds for templates its JavaScript engine cannot parse. */
function nativeJinja(l: Llama, template: string): { render(items: Record<string, unknown>): string } {
  const bindings = (l as unknown as { _bindings: { AddonJinjaRenderer: new (t: string) => { render(items: Record<string, unknown>): string } } })._bindings;
  return new bindings.AddonJinjaRenderer(template);
}

const conversation = {
  messages: [
    { role: "system" as const, content: "You are terse." },
    { role: "user" as const, content: "Weather in Paris?" },
    {
      role: "assistant" as const,
      content: null,
      tool_calls: [{ id: "call_1", type: "function" as const, function: { name: "get_weather", arguments: '{"city":"Paris"}' } }],
    },
    { role: "tool" as const, tool_call_id: "call_1", content: "sunny" },
    { role: "assistant" as const, content: "Sunny." },
    { role: "user" as const, content: "Thanks" },
  ],
  tools: [{ type: "function" as const, function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } }],
};

describe("tiny model", () => {
  it("is byte-identical for the same seed and differs for another seed", async () => {
    const a = join(dir, "a.gguf");
    const b = join(dir, "b.gguf");
    const c = join(dir, "c.gguf");
    await buildTinyModel({ outPath: a, seed: 7 });
    await buildTinyModel({ outPath: b, seed: 7 });
    await buildTinyModel({ outPath: c, seed: 8 });
    const [ba, bb, bc] = await Promise.all([readFile(a), readFile(b), readFile(c)]);
    expect(ba.equals(bb)).toBe(true);
    expect(ba.equals(bc)).toBe(false);
  });

  it("has the metadata llama.cpp needs and a 1-5M parameter size", async () => {
    const path = await tinyModelPath("llama");
    const file = await readGgufHeader(path);
    const md = file.metadata;
    expect(md["general.architecture"]).toBe("llama");
    for (const key of ["context_length", "embedding_length", "block_count", "feed_forward_length", "attention.head_count",
      "attention.head_count_kv", "attention.layer_norm_rms_epsilon", "rope.freq_base"]) {
      expect(md[`llama.${key}`], key).toBeDefined();
    }
    const tokens = md["tokenizer.ggml.tokens"] as string[];
    expect(tokens.length).toBeGreaterThan(1000);
    expect(tokens.slice(-3)).toEqual(["<|endoftext|>", "<|im_start|>", "<|im_end|>"]);
    expect(md["tokenizer.ggml.eos_token_id"]).toBe(tokens.indexOf("<|im_end|>"));
    const params = file.tensors.reduce((s, t) => s + t.dims.reduce((a, b) => a * b, 1), 0);
    expect(params).toBeGreaterThan(1_000_000);
    expect(params).toBeLessThan(5_000_000);
    // node-llama-cpp's independent GGUF parser reads the same file.
    const info = await readGgufFileInfo(path);
    expect(info.tensorInfo?.map((t) => t.name)).toEqual(file.tensors.map((t) => t.name));
    expect(info.metadata.llama?.embedding_length).toBe(md["llama.embedding_length"]);
  });

  it("lays out qwen2 biases and qwen3 q/k norms", () => {
    const names = (arch: "qwen2" | "qwen3"): string[] => tinyModelContents({ arch }).tensors.map((t) => t.name);
    expect(names("qwen2")).toContain("blk.0.attn_q.bias");
    expect(names("qwen2")).not.toContain("blk.0.attn_q_norm.weight");
    expect(names("qwen3")).toContain("blk.0.attn_k_norm.weight");
    expect(names("qwen3")).not.toContain("blk.0.attn_v.bias");
    const kvs = tinyModelContents({ arch: "qwen3" }).kvs.map((k) => k.key);
    expect(kvs).toContain("qwen3.attention.key_length");
  });

  it("renders ChatML with tools, tool calls and tool results, identically in both Jinja engines", async () => {
    const file = await readGgufHeader(await tinyModelPath("llama"));
    const template = file.metadata["tokenizer.chat_template"] as string;
    const text = renderChat(template, { ...conversation, addGenerationPrompt: true });
    expect(text.startsWith("<|im_start|>system\nYou are terse.\n\n# Tools")).toBe(true);
    expect(text).toContain('<tools>\n{"type": "function", "function": {"name": "get_weather"');
    expect(text).toContain('<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n');
    expect(text).toContain("<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n");
    expect(text).toContain("<|im_start|>assistant\nSunny.<|im_end|>\n<|im_start|>user\nThanks<|im_end|>\n");
    expect(text.endsWith("<|im_start|>assistant\n")).toBe(true);

    const plain = renderChat(template, { messages: [{ role: "developer", content: "Be brief." }, { role: "user", content: [{ type: "text", text: "Hi" }] }], addGenerationPrompt: false });
    expect(plain).toBe("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");

    const native = nativeJinja(llama, template).render({
      messages: toTemplateMessages(conversation.messages),
      tools: conversation.tools,
      add_generation_prompt: true,
      bos_token: "",
      eos_token: "",
    });
    expect(native).toBe(text);
  });

  it.each(["llama", "qwen2", "qwen3"] as const)("loads in llama.cpp and generates (%s)", async (arch) => {
    const model = await llama.loadModel({ modelPath: await tinyModelPath(arch) });
    try {
      const text = "<|im_start|>user\nHello, how is the weather?<|im_end|>\n<|im_start|>assistant\n";
      const tokens = model.tokenize(text, true);
      expect(tokens[0]).toBe(model.tokenize("<|im_start|>", true)[0]);
      expect(model.detokenize(tokens, true)).toBe(text);
      expect(model.tokens.eosString).toBe("<|im_end|>");
      const context = await model.createContext({ contextSize: 512, threads: 1 });
      const sequence = context.getSequence();
      const out: number[] = [];
      for await (const token of sequence.evaluate(tokens, { temperature: 0 })) {
        out.push(token);
        if (out.length >= 12) break;
      }
      expect(out.length).toBeGreaterThan(0);
      await context.dispose();
    } finally {
      await model.dispose();
    }
  });
});
