import os from "node:os";
import path from "node:path";

export type ServiceName = "search" | "training" | "inference";
export const SERVICE_NAMES: ServiceName[] = ["search", "training", "inference"];

export interface Config {
  dataDir: string;
  host: string;
  ports: Record<ServiceName, number>;
  services: ServiceName[];
  /** `postgres://…` for PostgreSQL; SQLite in the data directory otherwise. */
  databaseUrl?: string;
  /** A key registered for entity `local` at start (for scripts and tests). */
  apiKey?: string;
  logLevel: string;
  /** GGUF base models found here are served; the tiny default model is built here on a first start. */
  modelsDir: string;
  /** Run a training worker inside the server process. */
  worker: boolean;
  /** Sequences decoded together per model (llama.cpp), and requests that may wait for one. */
  parallel: number;
  maxQueue: number;
  /** llama.cpp threads per model; on a busy machine fewer threads decode faster than more. */
  threads: number;
  /** Check every JSON answer against the spec and turn a mismatch into a 500 (for tests and staging). */
  validateResponses: boolean;
  /** A running job's lease; a worker that stops renewing it loses the job after this long. */
  leaseSeconds: number;
  /** Tokens each entity may use per calendar month (UTC) on the chat endpoints; 0 means no limit. */
  tokenQuota: number;
  /** `file://` training data must be inside this directory. */
  importDir: string;
  maxBodyBytes: Record<ServiceName, number>;
  maxConcurrentRequests: number;
}

/** Every setting: its flag, its environment variable, and its default. Flags win over the environment. */
export const SETTINGS = {
  dataDir: { flag: "data-dir", env: "GYRE_DATA_DIR", default: "./data" },
  host: { flag: "host", env: "GYRE_HOST", default: "127.0.0.1" },
  searchPort: { flag: "search-port", env: "GYRE_SEARCH_PORT", default: "7700" },
  trainingPort: { flag: "training-port", env: "GYRE_TRAINING_PORT", default: "7701" },
  inferencePort: { flag: "inference-port", env: "GYRE_INFERENCE_PORT", default: "7702" },
  services: { flag: "services", env: "GYRE_SERVICES", default: "search,training,inference" },
  databaseUrl: { flag: "database-url", env: "GYRE_DATABASE_URL", default: "" },
  logLevel: { flag: "log-level", env: "GYRE_LOG_LEVEL", default: "info" },
  modelsDir: { flag: "models-dir", env: "GYRE_MODELS_DIR", default: "" },
  importDir: { flag: "import-dir", env: "GYRE_IMPORT_DIR", default: "" },
  worker: { flag: "worker", env: "GYRE_WORKER", default: "on" },
  parallel: { flag: "parallel", env: "GYRE_PARALLEL", default: "4" },
  maxQueue: { flag: "max-queue", env: "GYRE_MAX_QUEUE", default: "32" },
  threads: { flag: "threads", env: "GYRE_THREADS", default: "auto" },
  tokenQuota: { flag: "token-quota", env: "GYRE_TOKEN_QUOTA", default: "0" },
  leaseSeconds: { flag: "lease-seconds", env: "GYRE_LEASE_SECONDS", default: "30" },
  validateResponses: { flag: "validate-responses", env: "GYRE_VALIDATE_RESPONSES", default: "off" },
  maxConcurrentRequests: { flag: "max-concurrent-requests", env: "GYRE_MAX_CONCURRENT_REQUESTS", default: "256" },
} as const;

export type SettingName = keyof typeof SETTINGS;

export function loadConfig(flags: Partial<Record<SettingName, string>>, env: NodeJS.ProcessEnv = process.env): Config {
  const get = (name: SettingName): string => flags[name] ?? env[SETTINGS[name].env] ?? SETTINGS[name].default;
  const services = get("services")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  for (const s of services) {
    if (!SERVICE_NAMES.includes(s as ServiceName)) throw new Error(`Unknown service '${s}' in --services; expected ${SERVICE_NAMES.join(", ")}.`);
  }
  const dataDir = path.resolve(get("dataDir"));
  const onOff = (name: SettingName): boolean => {
    const value = get(name);
    if (!["on", "off"].includes(value)) throw new Error(`Invalid --${SETTINGS[name].flag} '${value}'; expected on or off.`);
    return value === "on";
  };
  return {
    dataDir,
    host: get("host"),
    ports: { search: port(get("searchPort")), training: port(get("trainingPort")), inference: port(get("inferencePort")) },
    services: services as ServiceName[],
    databaseUrl: get("databaseUrl") || undefined,
    apiKey: env.GYRE_API_KEY || undefined,
    logLevel: get("logLevel"),
    modelsDir: path.resolve(get("modelsDir") || path.join(dataDir, "models")),
    importDir: path.resolve(get("importDir") || path.join(dataDir, "imports")),
    worker: onOff("worker"),
    validateResponses: onOff("validateResponses"),
    parallel: positiveInt(get("parallel"), "parallel"),
    maxQueue: positiveInt(get("maxQueue"), "max-queue"),
    // One core is left to the HTTP side and the trainer.
    threads: get("threads") === "auto" ? Math.max(1, os.availableParallelism() - 1) : positiveInt(get("threads"), "threads"),
    tokenQuota: nonNegativeInt(get("tokenQuota"), "token-quota"),
    leaseSeconds: positiveInt(get("leaseSeconds"), "lease-seconds"),
    maxBodyBytes: { search: 32 * 1024 * 1024, training: 64 * 1024 * 1024, inference: 4 * 1024 * 1024 },
    maxConcurrentRequests: positiveInt(get("maxConcurrentRequests"), "max-concurrent-requests"),
  };
}

/** The configuration as it can be printed: no key, no database password. */
export function describeConfig(config: Config): Record<string, unknown> {
  return {
    dataDir: config.dataDir,
    modelsDir: config.modelsDir,
    importDir: config.importDir,
    worker: config.worker,
    parallel: config.parallel,
    maxQueue: config.maxQueue,
    threads: config.threads,
    tokenQuota: config.tokenQuota,
    leaseSeconds: config.leaseSeconds,
    validateResponses: config.validateResponses,
    host: config.host,
    ports: config.ports,
    services: config.services,
    database: config.databaseUrl ? config.databaseUrl.replace(/\/\/([^:@/]+):[^@/]*@/, "//$1:***@") : "sqlite",
    apiKeyFromEnv: Boolean(config.apiKey),
    maxBodyBytes: config.maxBodyBytes,
    maxConcurrentRequests: config.maxConcurrentRequests,
  };
}

function port(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new Error(`Invalid port '${value}'.`);
  return n;
}

function nonNegativeInt(value: string, name: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new Error(`Invalid --${name} '${value}'.`);
  return n;
}

function positiveInt(value: string, name: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new Error(`Invalid --${name} '${value}'.`);
  return n;
}
