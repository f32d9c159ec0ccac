import path from "node:path";
import { Ajv } from "ajv";
import addFormats from "ajv-formats";
import { OpenAPIBackend } from "openapi-backend";
import createClient from "openapi-fetch";
import type { paths as SearchPaths } from "../../generated/search.js";
import type { paths as TrainingPaths } from "../../generated/training.js";
import type { paths as InferencePaths } from "../../generated/inference.js";
import { SPEC_DIR } from "../../src/paths.js";

export type SpecName = "search" | "training" | "inference";

const apis = new Map<SpecName, Promise<OpenAPIBackend>>();

function specApi(spec: SpecName): Promise<OpenAPIBackend> {
  let api = apis.get(spec);
  if (!api) {
    const backend = new OpenAPIBackend({
      definition: path.join(SPEC_DIR, `${spec}.yaml`),
      quick: true,
      ajvOpts: { allErrors: true, strict: false },
      customizeAjv: (ajv) => {
        addFormats.default(ajv);
        return ajv;
      },
    });
    api = backend.init();
    apis.set(spec, api);
  }
  return api;
}

/**
 * Checks one response against the spec: the status must be declared for the operation, and a JSON body must
 * match that status's schema. Unrouted requests (404/405) must still answer in the service's error shape.
 */
export async function assertMatchesSpec(spec: SpecName, method: string, url: string, status: number, contentType: string, body: unknown): Promise<void> {
  const api = await specApi(spec);
  const { pathname } = new URL(url);
  const operation = api.router.matchOperation({ method, path: pathname, headers: {} });
  const where = `${method.toUpperCase()} ${pathname} -> ${status}`;
  if (!operation) {
    const schema = api.definition.components?.schemas?.[spec === "inference" ? "ErrorResponse" : "ErrorMessage"];
    const ajv = new Ajv({ strict: false });
    if (![404, 405].includes(status) || !ajv.validate(schema as object, body)) {
      throw new Error(`${where}: unrouted answer is not the service's error shape: ${JSON.stringify(body)}`);
    }
    return;
  }
  const declared = Object.keys(operation.responses ?? {});
  if (!declared.includes(String(status)) && !declared.includes("default")) {
    throw new Error(`${where}: status not declared in the spec (declared: ${declared.join(", ")}); body ${JSON.stringify(body).slice(0, 500)}`);
  }
  if (!contentType.includes("json")) return;
  const result = api.validator.validateResponse(body, operation, status);
  if (result.errors?.length) {
    throw new Error(`${where}: body does not match the spec: ${JSON.stringify(result.errors).slice(0, 1500)}\nbody: ${JSON.stringify(body).slice(0, 1500)}`);
  }
}

/** A fetch that checks every answer against the spec before handing it to the test. */
export function contractFetch(spec: SpecName): typeof fetch {
  return async (input, init) => {
    const request = new Request(input, init);
    const response = await fetch(request);
    const contentType = response.headers.get("content-type") ?? "";
    if (contentType.includes("json")) {
      const body: unknown = await response.clone().json();
      await assertMatchesSpec(spec, request.method, request.url, response.status, contentType, body);
    } else {
      await assertMatchesSpec(spec, request.method, request.url, response.status, contentType, undefined);
    }
    return response;
  };
}

function clientFor<P extends {}>(spec: SpecName, baseUrl: string, key?: string) {
  return createClient<P>({ baseUrl, fetch: contractFetch(spec), headers: key ? { Authorization: `Bearer ${key}` } : {} });
}

export const searchClient = (baseUrl: string, key?: string) => clientFor<SearchPaths>("search", baseUrl, key);
export const trainingClient = (baseUrl: string, key?: string) => clientFor<TrainingPaths>("training", baseUrl, key);
export const inferenceClient = (baseUrl: string, key?: string) => clientFor<InferencePaths>("inference", baseUrl, key);
