// The dex side of bench/peers in TypeScript's runtime: a Worker of the repository's TypeScript
// SDK (sdk/typescript, built into its dist/) hosting the two dex Flows of the benchmark, every
// Step one Execute of trivial work (it passes the run's input on), as the Restate service's
// ctx.run steps do:
//
//   peers-one     echo                       -> gracefulComplete(input)
//   peers-three   echo-1 -> echo-2 -> echo-3  (goTo the next with the input; the last completes)
//
// The Worker's hello declares both Flow types; nothing is registered beforehand. The C++ twin is
// bench/peers_worker.cc (dex-peers-worker).
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
const { Flow, Worker, goTo, gracefulComplete } = createRequire(import.meta.url)(
  path.join(sdkDir, "dist", "index.js"));

// A Flow of `n` Steps in a row named `names`, each passing the input on; the last completes
// the run with it as the output.
function chain(type, names) {
  const steps = names.map((name, i) => ({
    type: name,
    execute: i + 1 < names.length
      ? (ctx) => goTo(names[i + 1], ctx.input)
      : (ctx) => gracefulComplete(ctx.input),
  }));
  return new Flow({ type, startStep: names[0], steps });
}

const worker = new Worker({
  addresses: [flag("server", "127.0.0.1:8801")],
  maxConcurrentTasks: Number(flag("concurrency", "128")),
});
worker.host(chain("peers-one", ["echo"]));
worker.host(chain("peers-three", ["echo-1", "echo-2", "echo-3"]));
for (const signal of ["SIGINT", "SIGTERM"]) process.once(signal, () => void worker.shutdown());
const running = worker.run();
await worker.ready();
console.log(`dex-ts-worker ready (pid ${process.pid})`);
await running;
console.log(`dex-ts-worker stopped: ${JSON.stringify(worker.stats())}`);
