// The README's examples (examples/quickstart.ts and examples/shop.ts,
// importing the built package by its name) run against a real
// dex-server-zd dev.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import * as path from "node:path";
import { after, before, test } from "node:test";

import { DevServer } from "./helpers";

let server: DevServer;
before(async () => {
  server = await DevServer.start();
});
after(async () => {
  await server?.stop();
});

/** Runs examples/<name>.js against the server; resolves with its output. */
function runExample(name: string): Promise<string> {
  const script = path.resolve(__dirname, "..", "examples", `${name}.js`);
  return new Promise<string>((resolve, reject) => {
    execFile(
      process.execPath,
      [script],
      { env: { ...process.env, DEX_ADDRESS: server.address }, timeout: 30_000 },
      (error, stdout, stderr) => (error === null ? resolve(stdout) : reject(new Error(`${error.message}\n${stderr}`))),
    );
  });
}

test("the README's quickstart example completes its flow", async () => {
  assert.equal((await runExample("quickstart")).trim(), 'COMPLETED {"text":"HELLO, ADA! (signed by Grace, attempt 1)"}');
});

test("the README's Attributes and RPCs example reserves the last seat, ships it, and refuses a second reservation", async () => {
  const out = JSON.parse(await runExample("shop")) as Record<string, unknown>;
  assert.deepEqual(out["first"], { left: 0 });
  assert.equal(out["shipped"], true);
  assert.match(String(out["second"]), /^FAILED_PRECONDITION: .*no seats left in A1$/);
  assert.equal(out["stage"], "closing");
  assert.deepEqual(out["seats"], { A1: 0 });
});
