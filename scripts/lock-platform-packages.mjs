// Records node-llama-cpp's prebuilt-binary packages for other platforms in package-lock.json.
// `npm install` leaves out optional packages it cannot fetch metadata for; `npm ci` then refuses the lock as out
// of sync. Each entry carries its os/cpu, so `npm ci` skips it on every other platform without fetching it.
import { readFileSync, writeFileSync } from "node:fs";

const PLATFORMS = {
  "linux-arm64": ["linux", "arm64"],
  "linux-armv7l": ["linux", "arm"],
  "linux-riscv64": ["linux", "riscv64"],
  "linux-x64": ["linux", "x64"],
  "linux-x64-cuda": ["linux", "x64"],
  "linux-x64-cuda-ext": ["linux", "x64"],
  "linux-x64-vulkan": ["linux", "x64"],
  "mac-arm64-metal": ["darwin", "arm64"],
  "mac-x64": ["darwin", "x64"],
  "win-arm64": ["win32", "arm64"],
  "win-x64": ["win32", "x64"],
  "win-x64-cuda": ["win32", "x64"],
  "win-x64-cuda-ext": ["win32", "x64"],
  "win-x64-vulkan": ["win32", "x64"],
};

const lock = JSON.parse(readFileSync("package-lock.json", "utf8"));
const wanted = lock.packages["node_modules/node-llama-cpp"]?.optionalDependencies ?? {};
let added = 0;
for (const [name, version] of Object.entries(wanted)) {
  const key = `node_modules/${name}`;
  if (lock.packages[key]) continue;
  const [os, cpu] = PLATFORMS[name.split("/")[1]] ?? [];
  if (!os) throw new Error(`unknown platform package ${name}`);
  lock.packages[key] = { version, cpu: [cpu], license: "MIT", optional: true, os: [os], engines: { node: ">=20.0.0" } };
  added++;
}
lock.packages = Object.fromEntries(Object.entries(lock.packages).sort(([a], [b]) => (a === "" ? -1 : b === "" ? 1 : a.localeCompare(b))));
writeFileSync("package-lock.json", JSON.stringify(lock, null, 2) + "\n");
console.log(`package-lock.json: ${added} platform package entr${added === 1 ? "y" : "ies"} added`);
