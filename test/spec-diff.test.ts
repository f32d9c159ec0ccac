import { spawnSync, execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import YAML from "yaml";
import { compareSpecs, formatChange, type Change, type Severity } from "../scripts/lib/spec-compare.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

type Doc = Record<string, any>;

function baseDoc(): Doc {
  return {
    openapi: "3.1.0",
    info: { title: "t", version: "1" },
    security: [{ bearerAuth: [] }],
    components: { securitySchemes: { bearerAuth: { type: "http", scheme: "bearer" }, apiKey: { type: "apiKey", in: "header", name: "X-Key" } } },
    paths: {
      "/agents/search": {
        post: {
          operationId: "search",
          description: "Searches.",
          parameters: [{ name: "project_id", in: "header", required: false, schema: { type: "string" } }],
          requestBody: {
            required: true,
            content: {
              "application/json": {
                example: { project_id: "a/b" },
                schema: {
                  type: "object",
                  additionalProperties: false,
                  required: ["project_id"],
                  properties: {
                    project_id: { type: "string", description: "The project." },
                    query: { type: "string", maxLength: 2000 },
                    limit: { type: "integer", minimum: 0, maximum: 1000, default: 20 },
                    roles: { type: ["array", "null"], items: { type: "string", enum: ["user", "assistant"] } },
                    since: { type: "string" },
                    stop: { oneOf: [{ type: "string" }, { type: "array", maxItems: 4, items: { type: "string" } }] },
                  },
                },
              },
            },
          },
          responses: {
            "200": {
              description: "Hits.",
              content: {
                "application/json": {
                  schema: {
                    type: "object",
                    required: ["results"],
                    properties: {
                      results: {
                        type: "array",
                        items: {
                          type: "object",
                          required: ["id", "role"],
                          properties: {
                            id: { type: "string" },
                            role: { type: "string", enum: ["user", "assistant"] },
                            score: { type: "number" },
                            at: { type: "string", format: "date-time" },
                          },
                        },
                      },
                      total: { type: "integer" },
                    },
                  },
                },
              },
            },
            "422": { description: "Invalid.", content: { "application/json": { schema: { type: "object", properties: { detail: { type: "array" } } } } } },
          },
        },
      },
      "/models/{model_id}": {
        parameters: [{ name: "model_id", in: "path", required: true, schema: { type: "string", format: "uuid" } }],
        get: {
          operationId: "getModel",
          parameters: [{ name: "verbose", in: "query", required: false, schema: { type: "boolean" } }],
          responses: {
            "200": {
              description: "The model.",
              content: {
                "application/json": {
                  schema: {
                    allOf: [
                      { type: "object", required: ["object"], properties: { object: { type: "string", const: "model" } } },
                      { type: "object", required: ["id", "name"], properties: { id: { type: "string" }, name: { type: "string" }, step: { type: ["integer", "null"] } } },
                    ],
                  },
                },
              },
            },
          },
        },
      },
      "/health": { get: { operationId: "health", security: [], responses: { "200": { description: "Up." } } } },
    },
  };
}

/** The base document with `edit` applied to a deep copy. */
function edited(edit: (doc: Doc) => void): Doc {
  const doc = structuredClone(baseDoc());
  edit(doc);
  return doc;
}

const searchRequest = (doc: Doc) => doc.paths["/agents/search"].post.requestBody.content["application/json"].schema;
const searchResult = (doc: Doc) => doc.paths["/agents/search"].post.responses["200"].content["application/json"].schema.properties.results.items;

function diff(edit: (doc: Doc) => void): Change[] {
  return compareSpecs(baseDoc(), edited(edit));
}

function lines(changes: Change[]): string[] {
  return changes.map(formatChange);
}

function expectChange(changes: Change[], location: string, message: string | RegExp, severity: Severity): void {
  const match = changes.find((c) => c.location === location && (typeof message === "string" ? c.message === message : message.test(c.message)));
  expect(match, `no change at ${location} matching ${message} in:\n${lines(changes).join("\n")}`).toBeDefined();
  expect(match?.severity).toBe(severity);
}

function expectNoBreaking(changes: Change[]): void {
  expect(
    changes.filter((c) => c.severity === "breaking"),
    lines(changes).join("\n"),
  ).toEqual([]);
}

describe("compareSpecs", () => {
  it("finds nothing between identical documents", () => {
    expect(compareSpecs(baseDoc(), baseDoc())).toEqual([]);
  });

  describe("breaking changes", () => {
    it("an operation removed", () => {
      const changes = diff((d) => delete d.paths["/models/{model_id}"].get);
      expect(lines(changes)).toEqual(["GET /models/{model_id}: operation removed (BREAKING)"]);
    });

    it("an operationId changed", () => {
      expectChange(diff((d) => (d.paths["/health"].get.operationId = "getHealth")), "GET /health", 'operationId changed "health" -> "getHealth"', "breaking");
    });

    it("a success response status removed", () => {
      const changes = diff((d) => {
        const responses = d.paths["/agents/search"].post.responses;
        responses["201"] = responses["200"];
        delete responses["200"];
      });
      expectChange(changes, "POST /agents/search response 200", "success response removed", "breaking");
      expectChange(changes, "POST /agents/search response 201", "new success status", "noted");
    });

    it("a new required parameter, or an optional one made required", () => {
      const added = diff((d) => d.paths["/models/{model_id}"].get.parameters.push({ name: "project", in: "query", required: true, schema: { type: "string" } }));
      expectChange(added, "GET /models/{model_id} query parameter project", "new required parameter", "breaking");
      const required = diff((d) => (d.paths["/agents/search"].post.parameters[0].required = true));
      expectChange(required, "POST /agents/search header parameter project_id", "parameter became required", "breaking");
    });

    it("a new required request body property, or an optional one made required", () => {
      const added = diff((d) => {
        searchRequest(d).properties.tenant = { type: "string" };
        searchRequest(d).required.push("tenant");
      });
      expectChange(added, "POST /agents/search request body .tenant", "new required property", "breaking");
      const required = diff((d) => searchRequest(d).required.push("query"));
      expectChange(required, "POST /agents/search request body .query", "property became required", "breaking");
    });

    it("a request property removed when additional properties are forbidden", () => {
      const closed = diff((d) => delete searchRequest(d).properties.since);
      expectChange(closed, "POST /agents/search request body .since", "property removed (additional properties are not allowed)", "breaking");
      const open = diff((d) => {
        delete searchRequest(d).additionalProperties;
        delete searchRequest(d).properties.since;
      });
      expectChange(open, "POST /agents/search request body .since", "property removed (it is no longer documented)", "noted");
      expectNoBreaking(open);
    });

    it("a request enum value removed", () => {
      const changes = diff((d) => (searchRequest(d).properties.roles.items.enum = ["user"]));
      expect(lines(changes)).toEqual(['POST /agents/search request body .roles[]: enum value removed: "assistant" (BREAKING)']);
    });

    it("request constraints tightened", () => {
      expect(lines(diff((d) => (searchRequest(d).properties.limit.maximum = 500)))).toEqual([
        "POST /agents/search request body .limit: maximum lowered 1000 -> 500 (BREAKING)",
      ]);
      expectChange(diff((d) => (searchRequest(d).properties.limit.minimum = 1)), "POST /agents/search request body .limit", "minimum raised 0 -> 1", "breaking");
      expectChange(diff((d) => (searchRequest(d).properties.query.maxLength = 100)), "POST /agents/search request body .query", "maxLength lowered 2000 -> 100", "breaking");
      expectChange(diff((d) => (searchRequest(d).properties.query.minLength = 1)), "POST /agents/search request body .query", "minLength 1 added", "breaking");
      expectChange(diff((d) => (searchRequest(d).properties.since.pattern = "^\\d+$")), "POST /agents/search request body .since", 'pattern "^\\\\d+$" added', "breaking");
      expectChange(diff((d) => (searchRequest(d).properties.since.format = "date-time")), "POST /agents/search request body .since", 'format "date-time" added', "breaking");
      expectChange(
        diff((d) => (d.paths["/models/{model_id}"].parameters[0].schema.format = "uri")),
        "GET /models/{model_id} path parameter model_id",
        'format changed "uuid" -> "uri"',
        "breaking",
      );
      expectChange(diff((d) => (searchRequest(d).properties.roles.type = "array")), "POST /agents/search request body .roles", "type narrowed array|null -> array", "breaking");
      expectChange(diff((d) => (searchRequest(d).properties.limit.type = "string")), "POST /agents/search request body .limit", "type changed integer -> string", "breaking");
    });

    it("a change inside a union member is reported with its path", () => {
      const changes = diff((d) => (searchRequest(d).properties.stop.oneOf[1].maxItems = 2));
      expect(lines(changes)).toEqual(["POST /agents/search request body .stop.oneOf[1]: maxItems lowered 4 -> 2 (BREAKING)"]);
      const removed = diff((d) => searchRequest(d).properties.stop.oneOf.pop());
      expectChange(removed, "POST /agents/search request body .stop.oneOf[1]", "alternative removed (array)", "breaking");
    });

    it("a response property removed, made optional or retyped", () => {
      expectChange(diff((d) => delete searchResult(d).properties.score), "POST /agents/search response 200 .results[].score", "property removed", "breaking");
      expectChange(
        diff((d) => (searchResult(d).required = ["id"])),
        "POST /agents/search response 200 .results[].role",
        "property made optional (no longer in required)",
        "breaking",
      );
      expectChange(diff((d) => (searchResult(d).properties.score.type = "string")), "POST /agents/search response 200 .results[].score", "type changed number -> string", "breaking");
      expectChange(diff((d) => (searchResult(d).properties.id.type = ["string", "null"])), "POST /agents/search response 200 .results[].id", "type widened string -> string|null", "breaking");
      expectChange(diff((d) => delete searchResult(d).properties.at.format), "POST /agents/search response 200 .results[].at", 'format "date-time" removed', "breaking");
    });

    it("a response property removed from an allOf member", () => {
      const changes = diff((d) => {
        const member = d.paths["/models/{model_id}"].get.responses["200"].content["application/json"].schema.allOf[1];
        delete member.properties.name;
        member.required = ["id"];
      });
      expect(lines(changes)).toEqual(["GET /models/{model_id} response 200 .name: property removed (BREAKING)"]);
    });

    it("a security requirement added", () => {
      expectChange(diff((d) => delete d.paths["/health"].get.security), "GET /health", "security requirement added: bearerAuth (was none)", "breaking");
      expectChange(
        diff((d) => (d.security = [{ bearerAuth: [], apiKey: [] }])),
        "POST /agents/search",
        "security requirement added: bearerAuth+apiKey (was bearerAuth)",
        "breaking",
      );
      // An extra alternative asks nothing more of existing clients.
      const alternative = diff((d) => (d.security = [{ bearerAuth: [] }, { apiKey: [] }]));
      expectChange(alternative, "POST /agents/search", "security relaxed: bearerAuth or apiKey (was bearerAuth)", "compatible");
      expectNoBreaking(alternative);
    });
  });

  describe("compatible changes", () => {
    it("a new operation", () => {
      const changes = diff((d) => (d.paths["/metrics"] = { get: { operationId: "metrics", responses: { "200": { description: "m" } } } }));
      expect(lines(changes)).toEqual(["GET /metrics: operation added (compatible)"]);
    });

    it("a new optional request property or parameter", () => {
      const changes = diff((d) => {
        searchRequest(d).properties.agent_name = { type: ["string", "null"] };
        d.paths["/models/{model_id}"].get.parameters.push({ name: "expand", in: "query", schema: { type: "string" } });
      });
      expectChange(changes, "POST /agents/search request body .agent_name", "new optional property", "compatible");
      expectChange(changes, "GET /models/{model_id} query parameter expand", "new optional parameter", "compatible");
      expectNoBreaking(changes);
    });

    it("a new response property", () => {
      const changes = diff((d) => (searchResult(d).properties.trace_id = { type: "string" }));
      expect(lines(changes)).toEqual(["POST /agents/search response 200 .results[].trace_id: new property (compatible)"]);
    });

    it("loosened request constraints", () => {
      const changes = diff((d) => {
        const properties = searchRequest(d).properties;
        properties.limit.maximum = 5000;
        delete properties.limit.minimum;
        delete properties.query.maxLength;
        properties.stop.oneOf[1].maxItems = 8;
        properties.roles.items.type = ["string", "null"];
        searchRequest(d).required = [];
      });
      expectChange(changes, "POST /agents/search request body .limit", "maximum raised 1000 -> 5000", "compatible");
      expectChange(changes, "POST /agents/search request body .limit", "minimum 0 removed", "compatible");
      expectChange(changes, "POST /agents/search request body .query", "maxLength 2000 removed", "compatible");
      expectChange(changes, "POST /agents/search request body .roles[]", "type widened string -> string|null", "compatible");
      expectChange(changes, "POST /agents/search request body .project_id", "property is now optional", "compatible");
      expectNoBreaking(changes);
    });

    it("description and example changes", () => {
      const changes = diff((d) => {
        d.paths["/agents/search"].post.description = "Finds messages.";
        d.paths["/agents/search"].post.requestBody.content["application/json"].example = { project_id: "c/d" };
        searchRequest(d).properties.project_id.description = "entity/project";
      });
      expect(lines(changes)).toEqual([
        "POST /agents/search: description changed (compatible)",
        "POST /agents/search request body: examples changed (compatible)",
        "POST /agents/search request body .project_id: description changed (compatible)",
      ]);
    });

    it("new enum values in a request", () => {
      expect(lines(diff((d) => searchRequest(d).properties.roles.items.enum.push("tool")))).toEqual([
        'POST /agents/search request body .roles[]: enum value added: "tool" (compatible)',
      ]);
    });

    it("new enum values in a response are compatible but noted", () => {
      expect(lines(diff((d) => searchResult(d).properties.role.enum.push("tool")))).toEqual([
        'POST /agents/search response 200 .results[].role: enum value added: "tool" (compatible, noted)',
      ]);
    });

    it("tightened response constraints and a narrower response type", () => {
      const changes = diff((d) => {
        searchResult(d).properties.score.maximum = 1;
        d.paths["/models/{model_id}"].get.responses["200"].content["application/json"].schema.allOf[1].properties.step.type = "integer";
      });
      expectChange(changes, "POST /agents/search response 200 .results[].score", "maximum 1 added", "compatible");
      expectChange(changes, "GET /models/{model_id} response 200 .step", "type narrowed integer|null -> integer", "compatible");
      expectNoBreaking(changes);
    });

    it("moving a property between allOf members, or renaming a path parameter, is no interface change", () => {
      const changes = diff((d) => {
        const item = d.paths["/models/{model_id}"];
        const [meta, body] = item.get.responses["200"].content["application/json"].schema.allOf;
        meta.properties.id = body.properties.id;
        meta.required.push("id");
        delete body.properties.id;
        body.required = ["name"];
        item.parameters[0].name = "id";
        d.paths["/models/{id}"] = item;
        delete d.paths["/models/{model_id}"];
      });
      expect(lines(changes)).toEqual([
        "GET /models/{id}: path parameter names changed (was /models/{model_id}) (compatible)",
        "GET /models/{id} path parameter id: path parameter renamed model_id -> id (compatible)",
      ]);
    });
  });

  it("terminates on cyclic schemas and still reports changes inside them", () => {
    const cyclic = (maxItems: number): Doc =>
      edited((d) => {
        const node: Doc = { type: "object", properties: { name: { type: "string" } } };
        node.properties.children = { type: "array", maxItems, items: node };
        searchRequest(d).properties.tree = node;
      });
    expect(compareSpecs(cyclic(10), cyclic(10))).toEqual([]);
    expect(lines(compareSpecs(cyclic(10), cyclic(5)))).toEqual(["POST /agents/search request body .tree.children: maxItems lowered 10 -> 5 (BREAKING)"]);
  });
});

describe("spec-diff script", () => {
  let repo: string;
  const tsx = path.join(ROOT, "node_modules", ".bin", "tsx");

  function git(...args: string[]): void {
    execFileSync("git", ["-C", repo, "-c", "user.name=spec-diff", "-c", "user.email=spec-diff@localhost", ...args], { stdio: "ignore" });
  }

  function run(...args: string[]): { status: number | null; stdout: string } {
    const result = spawnSync(tsx, [path.join(ROOT, "scripts", "spec-diff.ts"), "--repo", repo, ...args], { encoding: "utf8", cwd: os.tmpdir() });
    return { status: result.status, stdout: `${result.stdout}${result.stderr}` };
  }

  function editYaml(file: string, edit: (doc: Doc) => void): void {
    const full = path.join(repo, "spec", file);
    const doc = YAML.parse(readFileSync(full, "utf8")) as Doc;
    edit(doc);
    writeFileSync(full, YAML.stringify(doc));
  }

  beforeAll(() => {
    repo = mkdtempSync(path.join(os.tmpdir(), "spec-diff-repo-"));
    git("init", "-q");
    writeFileSync(path.join(repo, "README"), "no specs yet\n");
    git("add", "-A");
    git("commit", "-q", "-m", "before the specs");
    git("tag", "before-specs");
    cpSync(path.join(ROOT, "spec"), path.join(repo, "spec"), { recursive: true });
    git("add", "-A");
    git("commit", "-q", "-m", "specs");
  });

  afterAll(() => rmSync(repo, { recursive: true, force: true }));

  it("reports no change for the committed specs", () => {
    const { status, stdout } = run();
    expect(stdout).toContain("Comparing spec/ at HEAD");
    expect(stdout).toContain("spec/training.yaml: no changes");
    expect(status).toBe(0);
  });

  it("reports specs missing at the base as new", () => {
    const { status, stdout } = run("--base", "before-specs");
    expect(stdout).toContain("spec/search.yaml: new spec (not present at before-specs) (compatible)");
    expect(status).toBe(0);
  });

  it("fails on a removed operation and passes on an added optional field in the shared components", () => {
    const original = new Map(["training.yaml", "components/chat.yaml"].map((f) => [f, readFileSync(path.join(repo, "spec", f), "utf8")]));
    try {
      editYaml("training.yaml", (doc) => delete doc.paths["/v1/preview/datasets/{dataset_id}"]);
      const removed = run("--base", "HEAD");
      expect(removed.stdout).toContain("GET /v1/preview/datasets/{dataset_id}: operation removed (BREAKING)");
      expect(removed.status).toBe(1);

      writeFileSync(path.join(repo, "spec", "training.yaml"), original.get("training.yaml") ?? "");
      editYaml("components/chat.yaml", (doc) => {
        doc.components.schemas.ChatCompletionRequest.properties.reasoning_effort = { type: ["string", "null"] };
      });
      const added = run("--base", "HEAD");
      expect(added.stdout).toContain("POST /v1/chat/completions request body .reasoning_effort: new optional property (compatible)");
      expect(added.stdout).toContain("POST /v1/chat/completions/ request body .reasoning_effort: new optional property (compatible)");
      expect(added.stdout).toContain("No breaking changes");
      expect(added.status).toBe(0);
    } finally {
      for (const [file, text] of original) writeFileSync(path.join(repo, "spec", file), text);
    }
  });

  it("exits 2 on an unknown base ref", () => {
    const { status, stdout } = run("--base", "no-such-ref");
    expect(stdout).toContain("unknown git ref no-such-ref");
    expect(status).toBe(2);
  });
});
