// Starts Prism mock servers for the three service specs: npx tsx scripts/mock.ts [--base-port 4010] [--host 127.0.0.1]
// search listens on the base port, training on base+1, inference on base+2. Ctrl-C stops them all.
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { PROJECT_ROOT, SPEC_DIR } from "../src/paths.js";

export type MockSpec = "search" | "training" | "inference";
export const MOCK_SPECS: readonly MockSpec[] = ["search", "training", "inference"];

export interface MockServer {
  spec: MockSpec;
  port: number;
  url: string;
}

export interface MockOptions {
  host?: string;
  /** Every line Prism prints, without colour codes. */
  onLog?: (spec: MockSpec, line: string) => void;
  /** Called when a server stops without being asked to. */
  onUnexpectedExit?: (spec: MockSpec, code: number | null, signal: NodeJS.Signals | null) => void;
  /** Makes `Prefer: dynamic=true` answers reproducible. */
  seed?: string;
  startTimeoutMs?: number;
}

export interface RunningMocks {
  servers: MockServer[];
  stop(): Promise<void>;
}

const PRISM_BIN = path.join(PROJECT_ROOT, "node_modules", ".bin", "prism");
const STOP_GRACE_MS = 5_000;
// eslint-disable-next-line no-control-regex
const ANSI = /\u001b\[[0-9;]*m/g;

function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const force = setTimeout(() => child.kill("SIGKILL"), STOP_GRACE_MS);
    child.once("exit", () => {
      clearTimeout(force);
      resolve();
    });
    child.kill("SIGTERM");
  });
}

function startOne(spec: MockSpec, port: number, host: string, options: MockOptions, stopping: () => boolean): Promise<{ server: MockServer; child: ChildProcess }> {
  const args = ["mock", path.join(SPEC_DIR, `${spec}.yaml`), "-p", String(port), "-h", host, ...(options.seed ? ["--seed", options.seed] : [])];
  const child = spawn(PRISM_BIN, args, {
    cwd: PROJECT_ROOT,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const output: string[] = [];
  return new Promise((resolve, reject) => {
    let ready = false;
    const fail = (reason: string) => {
      clearTimeout(timer);
      void stopProcess(child);
      reject(new Error(`prism mock for ${spec} on port ${port}: ${reason}\n${output.slice(-20).join("\n")}`));
    };
    const timer = setTimeout(() => fail("did not start listening in time"), options.startTimeoutMs ?? 60_000);
    for (const stream of [child.stdout, child.stderr]) {
      if (!stream) continue;
      createInterface({ input: stream }).on("line", (raw) => {
        const line = raw.replace(ANSI, "");
        output.push(line);
        if (output.length > 200) output.shift();
        options.onLog?.(spec, line);
        if (!ready && line.includes("Prism is listening on")) {
          ready = true;
          clearTimeout(timer);
          resolve({ server: { spec, port, url: `http://${host}:${port}` }, child });
        }
      });
    }
    child.once("error", (error) => fail(error.message));
    child.once("exit", (code, signal) => {
      if (!ready) fail(`exited with ${signal ?? code} before listening`);
      else if (!stopping()) options.onUnexpectedExit?.(spec, code, signal);
    });
  });
}

/** Starts one Prism mock server per spec on the given ports; resolves once all of them listen. */
export async function startMocks(ports: Record<MockSpec, number>, options: MockOptions = {}): Promise<RunningMocks> {
  const host = options.host ?? "127.0.0.1";
  let stopping = false;
  const started = await Promise.allSettled(MOCK_SPECS.map((spec) => startOne(spec, ports[spec], host, options, () => stopping)));
  const children = started.flatMap((r) => (r.status === "fulfilled" ? [r.value.child] : []));
  const stop = async () => {
    stopping = true;
    await Promise.all(children.map(stopProcess));
  };
  const failure = started.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failure) {
    await stop();
    throw failure.reason;
  }
  return { servers: started.flatMap((r) => (r.status === "fulfilled" ? [r.value.server] : [])), stop };
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { "base-port": { type: "string", default: "4010" }, host: { type: "string", default: "127.0.0.1" } } });
  const basePort = Number(values["base-port"]);
  if (!Number.isInteger(basePort) || basePort < 1 || basePort > 65533) throw new Error(`invalid --base-port ${values["base-port"]}`);
  const ports = Object.fromEntries(MOCK_SPECS.map((spec, i) => [spec, basePort + i])) as Record<MockSpec, number>;
  let mocks: RunningMocks | undefined;
  const shutdown = async (code: number) => {
    await mocks?.stop();
    process.exit(code);
  };
  mocks = await startMocks(ports, {
    host: values.host,
    onLog: (spec, line) => console.log(`[${spec}] ${line}`),
    onUnexpectedExit: (spec, code, signal) => {
      // Ctrl-C reaches the whole process group, so a server may stop on it before this process does.
      if (signal === "SIGINT" || signal === "SIGTERM") return void shutdown(0);
      console.error(`prism mock for ${spec} stopped (${signal ?? code}); stopping the others`);
      void shutdown(1);
    },
  });
  for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => void shutdown(0));
  console.log("\nMock servers:");
  for (const server of mocks.servers) console.log(`  ${server.spec.padEnd(10)} ${server.url}  (spec/${server.spec}.yaml)`);
  console.log("Press Ctrl-C to stop.");
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  main().catch((error: unknown) => {
    console.error(error instanceof Error ? error.message : String(error));
    process.exit(1);
  });
}
