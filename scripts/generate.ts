/**
 * Turns the OpenAPI specs into TypeScript types in generated/ (openapi-typescript).
 * `--check` regenerates in memory and fails when generated/ is stale, without writing anything.
 */
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { pathToFileURL } from "node:url";
import openapiTS, { COMMENT_HEADER, astToString } from "openapi-typescript";

const root = path.resolve(import.meta.dirname, "..");
const SPECS = ["search", "training", "inference"];
const { values } = parseArgs({ options: { check: { type: "boolean" }, "spec-dir": { type: "string" }, "out-dir": { type: "string" } } });
const specDir = path.resolve(values["spec-dir"] ?? path.join(root, "spec"));
const outDir = path.resolve(values["out-dir"] ?? path.join(root, "generated"));

async function render(spec: string): Promise<string> {
  const ast = await openapiTS(pathToFileURL(path.join(specDir, `${spec}.yaml`)), { silent: true, defaultNonNullable: false });
  return `${COMMENT_HEADER}// Source: spec/${spec}.yaml. Regenerate with \`make generate\`.\n\n${astToString(ast)}`;
}

const check = values.check === true;
const stale: string[] = [];
for (const spec of SPECS) {
  const target = path.join(outDir, `${spec}.ts`);
  const fresh = await render(spec);
  if (check) {
    let current = "";
    try {
      current = readFileSync(target, "utf8");
    } catch {
      // a missing file is stale too
    }
    if (current !== fresh) stale.push(target);
  } else {
    writeFileSync(target, fresh);
    console.log(`generated ${target} from ${path.join(specDir, `${spec}.yaml`)}`);
  }
}
if (stale.length) {
  console.error(`stale generated types: ${stale.join(", ")}; run 'make generate' and commit the result`);
  process.exit(1);
}
if (check) console.log(`${outDir} is up to date with ${specDir}`);
