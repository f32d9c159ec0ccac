// Lists the interface changes of spec/*.yaml against a git ref and fails when one breaks clients:
//   npx tsx scripts/spec-diff.ts [--base REF] [--repo DIR]
// Exit status: 0 no breaking change, 1 at least one breaking change, 2 the comparison could not run.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import $RefParser from "@apidevtools/json-schema-ref-parser";
import { compareSpecs, formatChange, type Change } from "./lib/spec-compare.js";

const SPEC_DIR = "spec";

function git(repo: string, args: string[]): string {
  return execFileSync("git", ["-C", repo, ...args], { encoding: "utf8", maxBuffer: 64 * 1024 * 1024, stdio: ["ignore", "pipe", "pipe"] });
}

function refExists(repo: string, ref: string): boolean {
  try {
    git(repo, ["rev-parse", "--verify", "--quiet", `${ref}^{commit}`]);
    return true;
  } catch {
    return false;
  }
}

/** Writes the ref's `spec/` tree (components included) into `dir`, so relative `$ref`s resolve as they did then. */
function checkoutSpecs(repo: string, ref: string, dir: string): void {
  const files = git(repo, ["ls-tree", "-r", "--name-only", ref, "--", SPEC_DIR]).split("\n").filter(Boolean);
  for (const file of files) {
    const target = path.join(dir, file);
    mkdirSync(path.dirname(target), { recursive: true });
    writeFileSync(target, execFileSync("git", ["-C", repo, "show", `${ref}:${file}`], { maxBuffer: 64 * 1024 * 1024 }));
  }
}

/** The service specs are the YAML/JSON files directly in `spec/`; subfolders hold shared components. */
function topLevelSpecs(specDir: string): string[] {
  try {
    return readdirSync(specDir, { withFileTypes: true })
      .filter((e) => e.isFile() && /\.(ya?ml|json)$/.test(e.name))
      .map((e) => e.name);
  } catch {
    return [];
  }
}

async function load(file: string): Promise<object> {
  return $RefParser.dereference(file, { resolve: { http: false } });
}

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { base: { type: "string" }, repo: { type: "string" } } });
  const repo = values.repo ? path.resolve(values.repo) : git(process.cwd(), ["rev-parse", "--show-toplevel"]).trim();
  const base = values.base ?? (refExists(repo, "origin/main") ? "origin/main" : "HEAD");
  if (!refExists(repo, base)) throw new Error(`unknown git ref ${base} in ${repo}`);

  const baseDir = mkdtempSync(path.join(os.tmpdir(), "spec-diff-"));
  try {
    checkoutSpecs(repo, base, baseDir);
    const baseSpecs = topLevelSpecs(path.join(baseDir, SPEC_DIR));
    const headSpecs = topLevelSpecs(path.join(repo, SPEC_DIR));
    const names = [...new Set([...baseSpecs, ...headSpecs])].sort();
    let breaking = 0;
    let total = 0;
    console.log(`Comparing ${SPEC_DIR}/ at ${base} with the working tree of ${repo}\n`);
    for (const name of names) {
      const label = `${SPEC_DIR}/${name}`;
      let changes: Change[];
      if (!baseSpecs.includes(name)) {
        changes = [{ location: label, message: `new spec (not present at ${base})`, severity: "compatible" }];
      } else if (!headSpecs.includes(name)) {
        changes = [{ location: label, message: "spec removed (every operation in it is gone)", severity: "breaking" }];
      } else {
        changes = compareSpecs(await load(path.join(baseDir, SPEC_DIR, name)), await load(path.join(repo, SPEC_DIR, name)));
      }
      const broken = changes.filter((c) => c.severity === "breaking").length;
      breaking += broken;
      total += changes.length;
      console.log(`${label}: ${changes.length === 0 ? "no changes" : `${changes.length} change${changes.length === 1 ? "" : "s"}, ${broken} breaking`}`);
      for (const change of changes) console.log(`  ${formatChange(change)}`);
      console.log("");
    }
    console.log(breaking > 0 ? `${breaking} breaking change${breaking === 1 ? "" : "s"} of ${total}.` : `No breaking changes (${total} change${total === 1 ? "" : "s"}).`);
    return breaking > 0 ? 1 : 0;
  } finally {
    rmSync(baseDir, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(`spec-diff: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(2);
  },
);
