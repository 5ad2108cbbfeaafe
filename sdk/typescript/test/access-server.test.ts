// Tokens against a real dex-server-zd dev with a token file per role (docs/api.md,
// "Access"; issue 31): the Client sends its token on every call (options, a token
// file, $DEX_TOKEN), a viewer reads but cannot start, and a Worker without the
// worker role cannot connect while one with it can.
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";

import { Client, DexError, Flow, Worker, gracefulComplete, readTokenFile, type Step } from "../src/index";
import { DevServer, MemoryLogger } from "./helpers";

const done: Step<{ n: number }> = { type: "Done", execute: (ctx) => gracefulComplete(ctx.input) };
const DONE = new Flow({ type: "ts-access-done", startStep: done, steps: [done] });

const ROLES = ["viewer", "client", "worker", "admin"] as const;
type Role = (typeof ROLES)[number];

describe("access tokens on a dex server", () => {
  let server: DevServer;
  let dir: string;
  const file = {} as Record<Role, string>;
  const token = {} as Record<Role, string>;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "dex-ts-access-"));
    const lines = ["auth:", "  tokens:"];
    for (const role of ROLES) {
      token[role] = `ts-${role}-${process.pid}-${Date.now()}`;
      file[role] = path.join(dir, `${role}-token`);
      fs.writeFileSync(file[role], `${token[role]}\n`);
      lines.push(`    ${role}:`, `      files: [${JSON.stringify(file[role])}]`);
    }
    const config = path.join(dir, "dev.yaml");
    fs.writeFileSync(config, `${lines.join("\n")}\n`);
    server = await DevServer.start({ args: ["--config", config] });
  });

  after(async () => {
    await server?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  async function worker(options: { token?: string; tokenFile?: string }): Promise<{ w: Worker; logger: MemoryLogger }> {
    const logger = new MemoryLogger();
    const w = new Worker({ addresses: [server.address], logger, reconnectBackoffInitialMs: 20, reconnectBackoffMaxMs: 100, ...options });
    w.host(DONE);
    return { w, logger };
  }

  test("a Worker without the worker role is refused and says why; with it, it connects", async () => {
    for (const t of [undefined, "not-a-token", token.client]) {
      const { w, logger } = await worker(t === undefined ? {} : { token: t });
      const ran = w.run();
      const deadline = Date.now() + 10_000;
      while (!logger.lines.some((l) => l.includes("refused this Worker's credential")) && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 20));
      }
      assert.ok(logger.lines.some((l) => l.includes("refused this Worker's credential")), logger.lines.join("\n"));
      const expected = t === token.client ? "PERMISSION_DENIED" : "UNAUTHENTICATED";
      assert.ok(logger.lines.some((l) => l.includes(expected)), logger.lines.join("\n"));
      assert.ok(!logger.lines.some((l) => t !== undefined && l.includes(t)), "the token was logged");
      await w.shutdown();
      await ran;
    }
    const { w } = await worker({ tokenFile: file.worker });
    const ran = w.run();
    await w.ready();
    await w.shutdown();
    await ran;
  });

  test("the Client sends its token; a viewer reads and cannot start", async () => {
    const { w } = await worker({ token: token.worker });
    const ran = w.run();
    await w.ready();
    try {
      const saved = process.env["DEX_TOKEN"];
      delete process.env["DEX_TOKEN"];
      const none = new Client({ addresses: [server.address], timeoutMs: 10_000 });
      await assert.rejects(none.startFlow(DONE, "ts-a-0", { n: 0 }), (e: unknown) => e instanceof DexError && e.code === "UNAUTHENTICATED");
      none.close();
      const client = new Client({ addresses: [server.address], timeoutMs: 10_000, tokenFile: file.client });
      await client.startFlow(DONE, "ts-a-1", { n: 1 });
      client.close();
      const viewer = new Client({ addresses: [server.address], timeoutMs: 10_000, token: token.viewer });
      await viewer.describeFlow("ts-a-1");
      await assert.rejects(viewer.startFlow(DONE, "ts-a-2", { n: 2 }), (e: unknown) => {
        assert.ok(e instanceof DexError && e.code === "PERMISSION_DENIED", String(e));
        assert.match(e.message, /needs the client role \(or admin\); this caller holds viewer/);
        return true;
      });
      viewer.close();
      // The environment, when the options give no token.
      process.env["DEX_TOKEN"] = token.client;
      const fromEnv = new Client({ addresses: [server.address], timeoutMs: 10_000 });
      await fromEnv.startFlow(DONE, "ts-a-3", { n: 3 });
      fromEnv.close();
      if (saved === undefined) delete process.env["DEX_TOKEN"];
      else process.env["DEX_TOKEN"] = saved;
      // A token file that cannot be read: every call rejects naming it.
      const missing = new Client({ addresses: [server.address], timeoutMs: 10_000, tokenFile: path.join(dir, "missing") });
      await assert.rejects(missing.describeFlow("ts-a-1"), (e: unknown) => e instanceof DexError && e.code === "INVALID_ARGUMENT" && e.message.includes("missing"));
      missing.close();
      assert.equal(readTokenFile(file.viewer), token.viewer);
    } finally {
      await w.shutdown();
      await ran;
    }
  });
});
