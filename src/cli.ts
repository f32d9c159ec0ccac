#!/usr/bin/env node
import { parseArgs } from "node:util";
import { SETTINGS, loadConfig, type SettingName } from "./config.js";
import { UsageError, type Command } from "./cli/command.js";
import { jobsCommand } from "./cli/jobs.js";
import { keysCommand } from "./cli/keys.js";
import { modelsCommand } from "./cli/models.js";
import { searchCommand } from "./cli/search.js";
import { serveCommand, workerCommand } from "./cli/serve.js";
import { usageCommand } from "./cli/usage.js";

const USAGE = `usage: gyre <command> [options]

commands:
  serve                                start the services (search, training, inference) and a training worker
  worker                               run a training worker only (several may share one PostgreSQL)
  keys create --entity NAME [--label]  create an API key (printed once)
  keys list | keys revoke KEY_ID       list API keys (never the keys themselves) / revoke one
  models list                          list the base models
  models add PATH [--id ID]            serve a GGUF file
  models add-upstream ID --url URL --model NAME [--key-env VAR]
                                       route a model to an OpenAI-compatible engine (vLLM, SGLang, llama.cpp server)
  models remove ID                     remove a registered model
  search "QUERY" --project E/P [--trace ID] [--roles a,b] [--conversation ID] [--limit N]
  jobs list [--model ID]               training jobs of --entity (default local)
  jobs follow JOB_ID                   live progress and each step's metrics until the job ends
  usage [--project E/P] [--model M] [--since ISO]   token usage totals of --entity (default local)

options (also as environment variables):
${Object.values(SETTINGS)
  .map((s) => `  --${s.flag.padEnd(26)} ${s.env.padEnd(30)} default: ${s.default || "(see README)"}`)
  .join("\n")}
  GYRE_API_KEY                  a key registered for entity 'local' at start
`;

const COMMANDS: Record<string, Command> = {
  serve: serveCommand,
  worker: workerCommand,
  keys: keysCommand,
  models: modelsCommand,
  search: searchCommand,
  jobs: jobsCommand,
  usage: usageCommand,
};

const COMMAND_OPTIONS = ["entity", "label", "id", "url", "model", "key-env", "project", "trace", "roles", "conversation", "limit", "since"];

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      ...Object.fromEntries(Object.values(SETTINGS).map((s) => [s.flag, { type: "string" as const }])),
      ...Object.fromEntries(COMMAND_OPTIONS.map((o) => [o, { type: "string" as const }])),
      help: { type: "boolean", short: "h" },
    },
  });
  const given = values as Record<string, string | boolean | undefined>;
  const [name, ...words] = positionals;
  if (given.help || !name) {
    process.stdout.write(USAGE);
    return name ? 0 : 2;
  }
  const command = COMMANDS[name];
  if (!command) {
    process.stderr.write(`unknown command '${name}'\n\n${USAGE}`);
    return 2;
  }
  const flags = Object.fromEntries(
    (Object.keys(SETTINGS) as SettingName[]).filter((k) => given[SETTINGS[k].flag] !== undefined).map((k) => [k, String(given[SETTINGS[k].flag])]),
  ) as Partial<Record<SettingName, string>>;
  try {
    return await command({
      config: loadConfig(flags),
      words,
      options: given,
      out: (t) => process.stdout.write(t),
      err: (t) => process.stderr.write(t),
    });
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`gyre ${name}: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: Error) => {
    process.stderr.write(`gyre: ${err.message}\n`);
    process.exit(1);
  },
);
