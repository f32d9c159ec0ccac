import { spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const root = path.resolve(import.meta.dirname, "..");
const work = mkdtempSync(path.join(os.tmpdir(), "gyre-gen-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function check(specDir: string, outDir: string) {
  return spawnSync(path.join(root, "node_modules/.bin/tsx"), [path.join(root, "scripts/generate.ts"), "--check", "--spec-dir", specDir, "--out-dir", outDir], { encoding: "utf8" });
}

describe("generated types", () => {
  it("are up to date with the specs, and a spec change without regeneration is caught", () => {
    const specDir = path.join(work, "spec");
    const outDir = path.join(work, "generated");
    cpSync(path.join(root, "spec"), specDir, { recursive: true });
    cpSync(path.join(root, "generated"), outDir, { recursive: true });
    const fresh = check(specDir, outDir);
    expect(fresh.status, fresh.stderr).toBe(0);

    const search = path.join(specDir, "search.yaml");
    writeFileSync(search, readFileSync(search, "utf8").replace("        query:\n          type: string\n", "        query:\n          type: string\n          minLength: 0\n        highlight:\n          type: boolean\n"));
    const stale = check(specDir, outDir);
    expect(stale.status).toBe(1);
    expect(stale.stderr).toContain("stale generated types");
    expect(stale.stderr).toContain("search.ts");
    expect(stale.stderr).not.toContain("training.ts");
  });
});
