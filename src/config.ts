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
  return {
    dataDir: path.resolve(get("dataDir")),
    host: get("host"),
    ports: { search: port(get("searchPort")), training: port(get("trainingPort")), inference: port(get("inferencePort")) },
    services: services as ServiceName[],
    databaseUrl: get("databaseUrl") || undefined,
    apiKey: env.GYRE_API_KEY || undefined,
    logLevel: get("logLevel"),
    maxBodyBytes: { search: 32 * 1024 * 1024, training: 64 * 1024 * 1024, inference: 4 * 1024 * 1024 },
    maxConcurrentRequests: positiveInt(get("maxConcurrentRequests"), "max-concurrent-requests"),
  };
}

/** The configuration as it can be printed: no key, no database password. */
export function describeConfig(config: Config): Record<string, unknown> {
  return {
    dataDir: config.dataDir,
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

function positiveInt(value: string, name: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new Error(`Invalid --${name} '${value}'.`);
  return n;
}
