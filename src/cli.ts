#!/usr/bin/env node
import { parseArgs } from "node:util";
import { listApiKeys, createApiKey, revokeApiKey } from "./auth/keys.js";
import { SETTINGS, describeConfig, loadConfig, type SettingName } from "./config.js";
import { createLogger } from "./logging.js";
import { startServer } from "./server.js";
import { openDatabase } from "./store/db.js";

const USAGE = `usage: gyre <command> [options]

commands:
  serve                         start the services (search, training, inference)
  keys create --entity NAME     create an API key (printed once) [--label TEXT]
  keys list                     list API keys (never the keys themselves)
  keys revoke KEY_ID            revoke an API key

options (also as environment variables):
${Object.values(SETTINGS)
  .map((s) => `  --${s.flag.padEnd(26)} ${s.env.padEnd(30)} default: ${s.default || "(none: SQLite in the data directory)"}`)
  .join("\n")}
  GYRE_API_KEY                  a key registered for entity 'local' at start
`;

const settingOptions = Object.fromEntries(Object.values(SETTINGS).map((s) => [s.flag, { type: "string" as const }]));

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { ...settingOptions, entity: { type: "string" }, label: { type: "string" }, help: { type: "boolean", short: "h" } },
  });
  const given = values as Record<string, unknown>;
  const flags = Object.fromEntries(
    (Object.keys(SETTINGS) as SettingName[]).filter((k) => given[SETTINGS[k].flag] !== undefined).map((k) => [k, String(given[SETTINGS[k].flag])]),
  ) as Partial<Record<SettingName, string>>;
  const [command, sub, arg] = positionals;
  if (values.help || !command) {
    process.stdout.write(USAGE);
    return command ? 0 : 2;
  }
  const config = loadConfig(flags);
  if (command === "serve") return serve(config);
  if (command === "keys") return keys(config, sub, arg, values.entity, values.label);
  process.stderr.write(`unknown command '${command}'\n\n${USAGE}`);
  return 2;
}

async function serve(config: ReturnType<typeof loadConfig>): Promise<number> {
  const logger = createLogger(config.logLevel);
  logger.info({ config: describeConfig(config) }, "starting");
  const server = await startServer(config, logger, {
    // Shown once, outside the JSON log stream, so the key never lands in log storage.
    onKeyCreated: (key, file) =>
      process.stderr.write(`\nNo API key existed, so one was created for entity 'local':\n\n  ${key}\n\nIt is saved in ${file} (mode 0600) and will not be shown again.\n\n`),
  });
  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      logger.info({ signal }, "shutting down");
      resolve();
    };
    process.once("SIGTERM", () => stop("SIGTERM"));
    process.once("SIGINT", () => stop("SIGINT"));
  });
  await server.close();
  logger.info("stopped");
  return 0;
}

async function keys(config: ReturnType<typeof loadConfig>, sub: string | undefined, arg: string | undefined, entity?: string, label?: string): Promise<number> {
  const db = await openDatabase({ dataDir: config.dataDir, url: config.databaseUrl });
  try {
    if (sub === "create") {
      if (!entity) throw new Error("keys create needs --entity NAME");
      const { id, key } = await createApiKey(db, entity, label ?? "");
      process.stdout.write(`${key}\n`);
      process.stderr.write(`created ${id} for entity '${entity}'; the key above is shown only this once\n`);
      return 0;
    }
    if (sub === "list") {
      for (const k of await listApiKeys(db)) {
        process.stdout.write(`${k.id}\t${k.entity}\t${k.revoked_at ? "revoked" : "active"}\tcreated ${k.created_at}\tlast used ${k.last_used_at ?? "never"}\t${k.label}\n`);
      }
      return 0;
    }
    if (sub === "revoke") {
      if (!arg) throw new Error("keys revoke needs a key id (see 'gyre keys list')");
      if (!(await revokeApiKey(db, arg))) {
        process.stderr.write(`no active key with id ${arg}\n`);
        return 1;
      }
      process.stdout.write(`revoked ${arg}\n`);
      return 0;
    }
    process.stderr.write(`unknown keys command '${sub ?? ""}'\n\n${USAGE}`);
    return 2;
  } finally {
    await db.destroy();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: Error) => {
    process.stderr.write(`gyre: ${err.message}\n`);
    process.exit(1);
  },
);
