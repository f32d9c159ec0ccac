import path from "node:path";
import type { AppContext } from "../app-context.js";
import { checkApi, checkDatabase, checkQueue } from "../health/checks.js";
import { SPEC_DIR } from "../paths.js";
import { deleteCheckpoints, listCheckpoints } from "../training/checkpoints.js";
import { getDataset, readTrainingDataOptions, uploadDataset } from "../training/datasets.js";
import { listEvents } from "../training/events.js";
import { assertJobVisible, cancelJob, createRlJob, createSftJob, getJob, listJobs, type JobStatus, type RlJobInput, type SftJobInput } from "../training/jobs.js";
import { createModel, deleteModel, getModel, listModels, type CreateModelInput } from "../training/models.js";
import { logTrajectories, type LogInput } from "../training/trajectory-log.js";
import { chatCompletionHandler } from "./chat-handler.js";
import { healthHandler, metricsHandler } from "./operations-handlers.js";
import type { OperationHandler, ServiceDefinition } from "./service-app.js";

const page = (query: Record<string, unknown>) => ({ after: query.after as string | undefined, limit: Number(query.limit ?? 20) });

export function trainingService(ctx: AppContext): ServiceDefinition {
  const { db, config, registry, chat, logger } = ctx;
  const dataOptions = readTrainingDataOptions(config);
  const systemCheck: OperationHandler = async () => {
    const [api, database, cpu_queue, gpu_queue] = await Promise.all([checkApi(), checkDatabase(db), checkQueue(db, "cpu"), checkQueue(db, "gpu")]);
    const body = { api, database, cpu_queue, gpu_queue };
    return { status: Object.values(body).every((c) => c.success) ? 200 : 503, body };
  };
  const chatCompletion = chatCompletionHandler(chat, "detail", logger, (input) => ({ principal: input.principal }));
  return {
    name: "training",
    specPath: path.join(SPEC_DIR, "training.yaml"),
    errorStyle: "detail",
    handlers: {
      createTrainingChatCompletion: chatCompletion,
      createTrainingChatCompletionSlash: chatCompletion,
      createModel: async ({ principal, body }) => ({ body: await createModel(db, principal, body as CreateModelInput, registry) }),
      listModels: async ({ principal, query }) => ({ body: await listModels(db, principal, { ...page(query), project: query.project as string | undefined }) }),
      getModel: async ({ principal, params }) => ({ body: await getModel(db, principal, params.model_id) }),
      deleteModel: async ({ principal, params }) => ({ body: await deleteModel(db, principal, params.model_id, config.dataDir) }),
      listCheckpoints: async ({ principal, params, query }) => {
        const model = await getModel(db, principal, params.model_id);
        return { body: await listCheckpoints(db, model, { ...page(query), order: (query.order as "asc" | "desc") ?? "asc" }) };
      },
      deleteCheckpoints: async ({ principal, params, body }) => {
        const model = await getModel(db, principal, params.model_id);
        return { body: await deleteCheckpoints(db, config.dataDir, model, (body as { steps: number[] }).steps) };
      },
      logTrajectories: async ({ principal, params, body }) => ({ body: await logTrajectories(db, principal, params.model_id, body as LogInput) }),
      uploadDataset: async ({ principal, query, body }) => ({
        body: await uploadDataset(
          db,
          principal,
          { entity: query.entity as string | undefined, project: query.project as string, name: query.name as string, text: body as string },
          config.dataDir,
        ),
      }),
      getDataset: async ({ principal, params }) => ({ body: await getDataset(db, principal, params.dataset_id) }),
      createSftTrainingJob: async ({ principal, body }) => ({ body: await createSftJob(db, principal, body as SftJobInput, dataOptions) }),
      createRlTrainingJob: async ({ principal, body }) => ({ body: await createRlJob(db, principal, body as RlJobInput, config.dataDir) }),
      listTrainingJobs: async ({ principal, query }) => ({
        body: await listJobs(db, principal, { ...page(query), model_id: query.model_id as string | undefined, status: query.status as JobStatus | undefined }),
      }),
      getTrainingJob: async ({ principal, params }) => ({ body: await getJob(db, principal, params.training_job_id) }),
      cancelTrainingJob: async ({ principal, params }) => ({ body: await cancelJob(db, principal, params.training_job_id) }),
      listTrainingJobEvents: async ({ principal, params, query }) => {
        await assertJobVisible(db, principal, params.training_job_id);
        return { body: await listEvents(db, params.training_job_id, page(query)) };
      },
      getTrainingHealth: healthHandler("training", db),
      getSystemCheck: systemCheck,
      getTrainingMetrics: metricsHandler,
    },
  };
}
