import path from "node:path";
import type { AppContext } from "../app-context.js";
import { authorizeProject, ensureProject, parseProjectId } from "../auth/projects.js";
import type { Principal } from "../auth/keys.js";
import { usageTotals } from "../inference/usage.js";
import { SPEC_DIR } from "../paths.js";
import { chatCompletionHandler } from "./chat-handler.js";
import { healthHandler, metricsHandler } from "./operations-handlers.js";
import type { OperationHandler, OperationInput, ServiceDefinition } from "./service-app.js";

/** `Compat-Project` wins over `OpenAI-Project` (what the OpenAI SDKs send); the team must be the key's entity. */
function attributedProject(input: OperationInput): string | undefined {
  const compat = input.headers["compat-project"];
  const header = compat !== undefined ? "Compat-Project" : "OpenAI-Project";
  const value = compat ?? input.headers["openai-project"];
  if (value === undefined || Array.isArray(value)) return undefined;
  return authorizeProject(input.principal, parseProjectId(value, ["header", header])).project;
}

function projectFilter(principal: Principal, value: unknown): string | undefined {
  if (typeof value !== "string") return undefined;
  return authorizeProject(principal, parseProjectId(value, ["query", "project"])).project;
}

export function inferenceService(ctx: AppContext): ServiceDefinition {
  const { db, chat, logger } = ctx;
  const createChatCompletion = chatCompletionHandler(chat, "openai", logger, (input) => ({ principal: input.principal, project: attributedProject(input) }));
  const withProject: OperationHandler = async (input) => {
    const project = attributedProject(input);
    if (project) await ensureProject(db, { entity: input.principal.entity, project });
    return createChatCompletion(input);
  };
  return {
    name: "inference",
    specPath: path.join(SPEC_DIR, "inference.yaml"),
    errorStyle: "openai",
    handlers: {
      createChatCompletion: withProject,
      listModels: async ({ principal }) => ({ body: { object: "list", data: await chat.listModels(principal) } }),
      getUsage: async ({ principal, query }) => ({
        body: {
          object: "list",
          data: await usageTotals(db, principal, {
            project: projectFilter(principal, query.project),
            model: query.model as string | undefined,
            since: query.since ? new Date(query.since as string) : undefined,
            until: query.until ? new Date(query.until as string) : undefined,
          }),
        },
      }),
      getInferenceHealth: healthHandler("inference", db),
      getInferenceMetrics: metricsHandler,
    },
  };
}
