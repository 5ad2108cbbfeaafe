// A small application of dex-sdk as installed from its packed tarball, outside
// the repository (test-pack/run.mjs copies it there): it starts a dev server,
// a Worker that hosts a one-Step Flow and a Client that starts a run of it and
// waits for it to complete, checks the output, and stops everything.
// Usage: node check.cjs <dex-server-zd> <data directory>
"use strict";
const assert = require("node:assert/strict");
const { spawn } = require("node:child_process");
const fs = require("node:fs");
const net = require("node:net");
const path = require("node:path");

const { Client, Flow, Worker, gracefulComplete } = require("dex-sdk");

const [serverBinary, dataDir] = process.argv.slice(2);
const READY = "dex-server-zd dev ready";
let server;
// Whatever ends this process ends the server too.
process.on("exit", () => server?.kill("SIGKILL"));

// Everything is bounded: past this the server is killed and the check fails.
const overall = setTimeout(() => {
  console.error("check.cjs: not done within 45 s");
  server?.kill("SIGKILL");
  process.exit(1);
}, 45_000);

function freePort() {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

/** Starts `dex-server-zd dev`; resolves with its address once it says it is ready. */
function startServer(port) {
  const lines = [];
  server = spawn(serverBinary, ["dev", "--data-dir", dataDir, "--listen", `127.0.0.1:${port}`], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  return new Promise((resolve, reject) => {
    let buffered = "";
    const onData = (chunk) => {
      buffered += chunk.toString("utf8");
      let newline;
      while ((newline = buffered.indexOf("\n")) >= 0) {
        const line = buffered.slice(0, newline);
        buffered = buffered.slice(newline + 1);
        lines.push(line);
        if (line.includes(READY)) resolve(`127.0.0.1:${port}`);
      }
    };
    server.stdout.on("data", onData);
    server.stderr.on("data", onData);
    server.once("error", reject);
    server.once("exit", (code, signal) =>
      reject(new Error(`dex-server-zd dev ended (${code ?? signal}) before it was ready:\n${lines.join("\n")}`)),
    );
  });
}

async function stopServer() {
  if (server === undefined || server.exitCode !== null || server.signalCode !== null) return;
  const exited = new Promise((resolve) => server.once("exit", resolve));
  server.kill("SIGTERM");
  const timer = setTimeout(() => server.kill("SIGKILL"), 10_000);
  await exited;
  clearTimeout(timer);
}

const greet = {
  type: "Greet",
  execute: (ctx) => gracefulComplete({ text: `hello, ${ctx.input.name}`, attempt: ctx.attempt }),
};
const flow = new Flow({ type: "PackCheck", startStep: greet, steps: [greet] });

async function main() {
  // The package is the installed one, with its own copy of the API definition.
  const main = require.resolve("dex-sdk");
  assert.ok(main.startsWith(path.join(__dirname, "node_modules", "dex-sdk") + path.sep), main);
  for (const name of ["api.proto", "flow.proto", "flow_api.proto", "flow_records.proto"]) {
    assert.ok(fs.existsSync(path.join(path.dirname(main), "..", "proto", "dex", name)), `the package has no proto/dex/${name}`);
  }

  const address = await startServer(await freePort());
  const quiet = { warn: () => undefined, error: (m) => console.error(`worker: ${m}`) };
  const worker = new Worker({ addresses: [address], logger: quiet }).host(flow);
  const running = worker.run();
  const client = new Client({ addresses: [address], timeoutMs: 10_000 });
  try {
    await worker.ready();
    const { runId } = await client.startFlow(flow, "pack-check-1", { name: "Ada" });
    const run = await client.waitForFlow("pack-check-1", { timeoutMs: 20_000 });
    assert.equal(run.runId, runId);
    assert.equal(run.status, "COMPLETED");
    assert.deepEqual(run.output, { text: "hello, Ada", attempt: 1 });
    console.log(`check.cjs: ${run.status} ${JSON.stringify(run.output)}`);
  } finally {
    client.close();
    await worker.shutdown();
    await running;
  }
}

main()
  .then(stopServer, async (error) => {
    await stopServer();
    throw error;
  })
  .then(
    () => clearTimeout(overall),
    (error) => {
      console.error(`check.cjs: ${error instanceof Error ? error.stack : error}`);
      process.exit(1);
    },
  );
