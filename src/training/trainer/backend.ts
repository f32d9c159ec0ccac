import { createRequire } from "node:module";
import path from "node:path";
import * as tf from "@tensorflow/tfjs";
import { setWasmPaths } from "@tensorflow/tfjs-backend-wasm";

let ready: Promise<void> | undefined;

/**
 * Selects the WebAssembly backend once per process. In Node the .wasm binaries are read from the package
 * directory, since the default would fetch them relative to a web page.
 */
export function initTensorBackend(): Promise<void> {
  ready ??= (async () => {
    const require = createRequire(import.meta.url);
    const entry = require.resolve("@tensorflow/tfjs-backend-wasm");
    setWasmPaths(path.dirname(entry) + path.sep);
    if (!(await tf.setBackend("wasm"))) throw new Error("the tfjs WebAssembly backend failed to initialise");
    await tf.ready();
  })();
  return ready;
}

export { tf };
