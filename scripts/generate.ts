/**
 * Turns the OpenAPI specs into TypeScript types in generated/ (openapi-typescript).
 * `--check` regenerates in memory and fails when generated/ is stale, without writing anything.
 */
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import openapiTS, { COMMENT_HEADER, astToString } from "openapi-typescript";

const root = path.resolve(import.meta.dirname, "..");
const SPECS = ["search", "training", "inference"];

async function render(spec: string): Promise<string> {
  const ast = await openapiTS(pathToFileURL(path.join(root, "spec", `${spec}.yaml`)), { silent: true, defaultNonNullable: false });
  return `${COMMENT_HEADER}// Source: spec/${spec}.yaml. Regenerate with \`make generate\`.\n\n${astToString(ast)}`;
}

const check = process.argv.includes("--check");
const stale: string[] = [];
for (const spec of SPECS) {
  const target = path.join(root, "generated", `${spec}.ts`);
  const fresh = await render(spec);
  if (check) {
    let current = "";
    try {
      current = readFileSync(target, "utf8");
    } catch {
      // a missing file is stale too
    }
    if (current !== fresh) stale.push(path.relative(root, target));
  } else {
    writeFileSync(target, fresh);
    console.log(`generated ${path.relative(root, target)} from spec/${spec}.yaml`);
  }
}
if (stale.length) {
  console.error(`stale generated types: ${stale.join(", ")}; run 'make generate' and commit the result`);
  process.exit(1);
}
if (check) console.log("generated/ is up to date with spec/");
