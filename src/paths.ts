import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));

/** The checkout or install root: sources run from `src/`, the build from `dist/src/`. */
export const PROJECT_ROOT = path.basename(path.dirname(here)) === "dist" ? path.resolve(here, "../..") : path.resolve(here, "..");

export const SPEC_DIR = path.join(PROJECT_ROOT, "spec");

export const VERSION = (JSON.parse(readFileSync(path.join(PROJECT_ROOT, "package.json"), "utf8")) as { version: string }).version;
