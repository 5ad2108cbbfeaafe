// The dex side of bench/peers in TypeScript's runtime: a Worker of the repository's TypeScript
// SDK (sdk/typescript, built into its dist/) serving task queue "peers", every Step trivial
// work (it returns the flow input), as the Restate service's ctx.run steps do. The flow types
// are registered by the benchmark (bench/peers/flow-types), not here.
//
//   node bench/peers/dex/worker.mjs --server 127.0.0.1:8801 [--concurrency 128] [--sdk DIR]
//
// Prints "dex-ts-worker ready" once a process accepted its stream; SIGTERM shuts it down
// gracefully.
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));

function flag(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

const sdkDir = path.resolve(flag("sdk", path.join(HERE, "..", "..", "..", "sdk", "typescript")));
const { Worker } = createRequire(import.meta.url)(path.join(sdkDir, "dist", "index.js"));

const worker = new Worker({
  addresses: [flag("server", "127.0.0.1:8801")],
  maxConcurrentTasks: Number(flag("concurrency", "128")),
});
worker.handle(flag("queue", "peers"), async (task) => task.flowInput);
for (const signal of ["SIGINT", "SIGTERM"]) process.once(signal, () => void worker.shutdown());
const running = worker.run();
await worker.ready();
console.log(`dex-ts-worker ready (pid ${process.pid})`);
await running;
console.log(`dex-ts-worker stopped: ${JSON.stringify(worker.stats())}`);
