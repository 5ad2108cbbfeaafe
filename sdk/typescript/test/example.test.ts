// The README's example (examples/quickstart.ts, importing the built package
// by its name) runs against a real dex-server-zd dev.
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

test("the README's quickstart example completes its flow", async () => {
  const script = path.resolve(__dirname, "..", "examples", "quickstart.js");
  const { stdout } = await new Promise<{ stdout: string; stderr: string }>((resolve, reject) => {
    execFile(
      process.execPath,
      [script],
      { env: { ...process.env, DEX_ADDRESS: server.address }, timeout: 30_000 },
      (error, stdout, stderr) => (error === null ? resolve({ stdout, stderr }) : reject(new Error(`${error.message}\n${stderr}`))),
    );
  });
  assert.equal(stdout.trim(), 'COMPLETED {"text":"HELLO, ADA! (signed by Grace, attempt 1)"}');
});
