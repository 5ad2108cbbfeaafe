// TLS and mutual TLS against a real dex-server-zd dev (docs/api.md, "TLS";
// issue 31), with certificates made by openssl at test time (tls-certs.ts):
// a Client and a Worker with the CA and a client certificate run a Flow, also
// through the multi-address search; without a client certificate the server
// refuses; a wrong CA, a wrong name and an expired server certificate each
// fail with their own words; serverName lets a client dial 127.0.0.1 to a
// certificate that names only localhost; a client certificate rotated on
// disk is used by the next connection; bad files fail before any call, naming
// the option and the path.
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as http2 from "node:http2";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";

import { Client, DexError, Flow, Worker, gracefulComplete, type Step, type TlsOptions } from "../src/index";
import { tlsFailureHint } from "../src/errors";
import { resolveTls, wantsDiagnosis } from "../src/tls";
import * as grpc from "@grpc/grpc-js";

import { checkReadiness } from "../src/readiness";
import { DevServer, eventually, freePort, MemoryLogger, ServeProcess } from "./helpers";
import { makeCerts, type Certs } from "./tls-certs";

const done: Step<{ n: number }> = { type: "Done", execute: (ctx) => gracefulComplete(ctx.input) };
const DONE = new Flow({ type: "ts-tls-done", startStep: done, steps: [done] });

const TLS_VARS = ["DEX_TLS", "DEX_TLS_CA_FILE", "DEX_TLS_CERT_FILE", "DEX_TLS_KEY_FILE", "DEX_TLS_SERVER_NAME"];

/** Runs `body` with the DEX_TLS* variables set to `vars` only, restoring them after. */
async function withTlsEnv<T>(vars: Record<string, string>, body: () => Promise<T> | T): Promise<T> {
  const saved = new Map(TLS_VARS.map((v) => [v, process.env[v]]));
  for (const v of TLS_VARS) delete process.env[v];
  Object.assign(process.env, vars);
  try {
    return await body();
  } finally {
    for (const [v, value] of saved) {
      if (value === undefined) delete process.env[v];
      else process.env[v] = value;
    }
  }
}

/** The rejection of `call` as a DexError (the test fails when it resolves or throws something else). */
async function rejection(call: Promise<unknown>): Promise<DexError> {
  try {
    await call;
  } catch (error) {
    assert.ok(error instanceof DexError, `not a DexError: ${String(error)}`);
    return error;
  }
  assert.fail("the call succeeded");
}

function tlsConfig(certs: Certs, server: string, clientCa: boolean): string {
  const lines = ["api:", "  tls:", `    certFile: ${JSON.stringify(certs.pem(server))}`, `    keyFile: ${JSON.stringify(certs.key(server))}`];
  if (clientCa) lines.push(`    clientCaFile: ${JSON.stringify(certs.pem("ca"))}`, "    clientAuth: required");
  return `${lines.join("\n")}\n`;
}

describe("TLS to a dex server", () => {
  let dir: string;
  let certs: Certs;
  let server: DevServer; // mutual TLS, certificate for localhost and 127.0.0.1
  let localhostOnly: DevServer; // TLS, certificate for localhost only, no client certificates
  let mtls: TlsOptions;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "dex-ts-tls-"));
    certs = makeCerts(path.join(dir, "certs"));
    const mtlsConfig = path.join(dir, "mtls.yaml");
    fs.writeFileSync(mtlsConfig, tlsConfig(certs, "server", true));
    const localConfig = path.join(dir, "localhost-only.yaml");
    fs.writeFileSync(localConfig, tlsConfig(certs, "localhost-only", false));
    server = await DevServer.start({ args: ["--config", mtlsConfig] });
    localhostOnly = await DevServer.start({ args: ["--config", localConfig] });
    mtls = { caFile: certs.pem("ca"), certFile: certs.pem("client"), keyFile: certs.key("client") };
  });

  after(async () => {
    await server?.stop();
    await localhostOnly?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test("a Client and a Worker with the CA and a client certificate run a Flow, also through the address search", async () => {
    await withTlsEnv({}, async () => {
      // Another address first, where nothing listens: the search moves on with the same credentials.
      const nobody = `127.0.0.1:${await freePort()}`;
      const logger = new MemoryLogger();
      const w = new Worker({ addresses: [nobody, server.address], logger, reconnectBackoffInitialMs: 20, reconnectBackoffMaxMs: 100, ...mtls });
      w.host(DONE);
      const ran = w.run();
      try {
        await w.ready();
        assert.equal(w.stats().connectedAddress, server.address);
        const client = new Client({ addresses: [nobody, server.address], timeoutMs: 20_000, ...mtls });
        try {
          const result = await client.startFlowAndWait(DONE, "ts-tls-1", { n: 1 }, { waitTimeoutMs: 15_000 });
          assert.equal(result.flow.status, "COMPLETED", JSON.stringify(result.flow));
          assert.equal(client.preferredAddress, server.address);
        } finally {
          client.close();
        }
      } finally {
        await w.shutdown();
        await ran;
      }
    });
  });

  test("the environment variables give the same options (DEX_TLS_CA_FILE, DEX_TLS_CERT_FILE, DEX_TLS_KEY_FILE)", async () => {
    await withTlsEnv(
      { DEX_TLS_CA_FILE: certs.pem("ca"), DEX_TLS_CERT_FILE: certs.pem("client"), DEX_TLS_KEY_FILE: certs.key("client") },
      async () => {
        const client = new Client({ addresses: [server.address], timeoutMs: 10_000 });
        try {
          const e = await rejection(client.describeFlow("ts-tls-never-started"));
          assert.equal(e.code, "NOT_FOUND", e.message); // the server answered over mutual TLS
        } finally {
          client.close();
        }
        // tls: false turns TLS off whatever the environment says: plaintext to a TLS listener fails.
        assert.throws(() => new Client({ addresses: [server.address], tls: false, caFile: certs.pem("ca") }), /tls is false but caFile is set/);
      },
    );
    await withTlsEnv({ DEX_TLS: "maybe" }, () => {
      assert.throws(() => new Client({ addresses: [server.address] }), /\$DEX_TLS must be 1, true or yes/);
    });
  });

  test("without a client certificate the server refuses, and the error says a client certificate is needed", async () => {
    await withTlsEnv({}, async () => {
      const client = new Client({ addresses: [server.address], timeoutMs: 5_000, caFile: certs.pem("ca") });
      try {
        const e = await rejection(client.describeFlow("ts-tls-x"));
        assert.equal(e.code, "UNAVAILABLE", e.message);
        assert.match(e.message, /TLS: the server requires a client certificate/, e.message);
      } finally {
        client.close();
      }
      // A client certificate from a CA the server does not trust is refused too.
      const other = new Client({
        addresses: [server.address],
        timeoutMs: 5_000,
        caFile: certs.pem("ca"),
        certFile: certs.pem("other-client"),
        keyFile: certs.key("other-client"),
      });
      try {
        const e = await rejection(other.describeFlow("ts-tls-x"));
        assert.equal(e.code, "UNAVAILABLE", e.message);
        assert.match(e.message, /TLS: the server refused this client's certificate/, e.message);
      } finally {
        other.close();
      }
      // A Worker without one says why in its log, and keeps trying.
      const logger = new MemoryLogger();
      const w = new Worker({ addresses: [server.address], logger, reconnectBackoffInitialMs: 20, reconnectBackoffMaxMs: 100, caFile: certs.pem("ca") });
      w.host(DONE);
      const ran = w.run();
      try {
        const deadline = Date.now() + 10_000;
        while (!logger.lines.some((l) => l.includes("client certificate")) && Date.now() < deadline) {
          await new Promise((r) => setTimeout(r, 20));
        }
        assert.ok(
          logger.lines.some((l) => l.startsWith("error ") && l.includes("TLS: the server requires a client certificate")),
          logger.lines.join("\n"),
        );
        assert.equal(w.stats().streamsAccepted, 0);
      } finally {
        await w.shutdown();
        await ran;
      }
    });
  });

  test("a wrong CA fails saying the certificate is not signed by the CA in caFile", async () => {
    await withTlsEnv({}, async () => {
      const client = new Client({ ...mtls, addresses: [server.address], timeoutMs: 5_000, caFile: certs.pem("other-ca") });
      try {
        const e = await rejection(client.describeFlow("ts-tls-x"));
        assert.equal(e.code, "UNAVAILABLE", e.message);
        assert.match(e.message, /TLS: the server's certificate is not signed by the CA in caFile/, e.message);
        assert.doesNotMatch(e.message, /not for the name/, e.message);
      } finally {
        client.close();
      }
    });
  });

  test("a wrong server name fails saying the certificate is not for that name", async () => {
    await withTlsEnv({}, async () => {
      const client = new Client({ ...mtls, addresses: [server.address], timeoutMs: 5_000, serverName: "elsewhere.example" });
      try {
        const e = await rejection(client.describeFlow("ts-tls-x"));
        assert.equal(e.code, "UNAVAILABLE", e.message);
        assert.match(e.message, /TLS: the server's certificate is not for the name dialled/, e.message);
        assert.doesNotMatch(e.message, /not signed by/, e.message);
      } finally {
        client.close();
      }
    });
  });

  test("serverName: dialling 127.0.0.1 to a certificate for localhost only fails without it and works with it", async () => {
    await withTlsEnv({}, async () => {
      const plain = new Client({ addresses: [localhostOnly.address], timeoutMs: 5_000, caFile: certs.pem("ca") });
      try {
        const e = await rejection(plain.describeFlow("ts-tls-x"));
        assert.match(e.message, /not for the name dialled/, e.message);
        assert.match(e.message, /127\.0\.0\.1/, e.message);
      } finally {
        plain.close();
      }
      const named = new Client({ addresses: [localhostOnly.address], timeoutMs: 10_000, caFile: certs.pem("ca"), serverName: "localhost" });
      try {
        const e = await rejection(named.describeFlow("ts-tls-x"));
        assert.equal(e.code, "NOT_FOUND", e.message);
      } finally {
        named.close();
      }
      // The Worker too, and through the environment.
      await withTlsEnv({ DEX_TLS_CA_FILE: certs.pem("ca"), DEX_TLS_SERVER_NAME: "localhost" }, async () => {
        const w = new Worker({ addresses: [localhostOnly.address], logger: new MemoryLogger(), reconnectBackoffInitialMs: 20, reconnectBackoffMaxMs: 100 });
        w.host(DONE);
        const ran = w.run();
        try {
          await w.ready();
        } finally {
          await w.shutdown();
          await ran;
        }
      });
    });
  });

  test("a client certificate rotated on disk is used by the next connection, without a new Client or Worker", async () => {
    await withTlsEnv({}, async () => {
      const cert = path.join(dir, "rotating.pem");
      const key = path.join(dir, "rotating.key");
      // As a rotation does it: a new file renamed over the old one.
      const install = (name: string): void => {
        fs.copyFileSync(certs.key(name), `${key}.tmp`);
        fs.renameSync(`${key}.tmp`, key);
        fs.copyFileSync(certs.pem(name), `${cert}.tmp`);
        fs.renameSync(`${cert}.tmp`, cert);
      };
      const rotating: TlsOptions = { caFile: certs.pem("ca"), certFile: cert, keyFile: key };
      install("other-client");
      const logger = new MemoryLogger();
      const w = new Worker({ addresses: [server.address], logger, reconnectBackoffInitialMs: 20, reconnectBackoffMaxMs: 100, ...rotating });
      w.host(DONE);
      const ran = w.run();
      try {
        await eventually("the Worker to log that the server refused its certificate", () =>
          logger.lines.some((l) => l.includes("TLS: the server refused this client's certificate")),
        );
        install("client");
        await w.ready(); // the next stream used the new certificate
        const client = new Client({ addresses: [server.address], timeoutMs: 10_000, ...rotating });
        try {
          const result = await client.startFlowAndWait(DONE, "ts-tls-rotated", { n: 2 }, { waitTimeoutMs: 15_000 });
          assert.equal(result.flow.status, "COMPLETED");
          install("other-client");
          await new Promise((r) => setTimeout(r, 1_100)); // the files are looked at once a second
          const e = await rejection(client.describeFlow("ts-tls-rotated"));
          assert.match(e.message, /TLS: the server refused this client's certificate/, e.message);
          install("client");
          await new Promise((r) => setTimeout(r, 1_100));
          const flow = await client.describeFlow("ts-tls-rotated");
          assert.equal(flow.status, "COMPLETED");
        } finally {
          client.close();
        }
      } finally {
        await w.shutdown();
        await ran;
      }
    });
  });

  test("the example program's worker takes --ca-file, --cert-file and --key-file and connects", async () => {
    const main = path.resolve(__dirname, "..", "examples", "flows", "main.js");
    const { spawn } = await import("node:child_process");
    const args = [main, "worker", "--server", server.address, "--ca-file", certs.pem("ca"), "--cert-file", certs.pem("client"), "--key-file", certs.key("client")];
    const env = { ...process.env };
    for (const v of TLS_VARS) delete env[v];
    const worker = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "pipe"], env });
    let output = "";
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`the example worker did not connect within 20 s:\n${output}`)), 20_000);
        const onData = (chunk: Buffer): void => {
          output += chunk.toString("utf8");
          if (output.includes("connected to")) {
            clearTimeout(timer);
            resolve();
          }
        };
        worker.stdout?.on("data", onData);
        worker.stderr?.on("data", onData);
        worker.once("exit", (code) => {
          clearTimeout(timer);
          reject(new Error(`the example worker exited with ${code}:\n${output}`));
        });
      });
    } finally {
      worker.kill("SIGKILL");
    }
  });

  test("plaintext to a TLS listener fails saying the server speaks TLS", async () => {
    await withTlsEnv({}, async () => {
      const client = new Client({ addresses: [server.address], timeoutMs: 5_000 });
      try {
        const e = await rejection(client.describeFlow("ts-tls-x"));
        assert.equal(e.code, "UNAVAILABLE", e.message);
        assert.match(e.message, /the server at 127\.0\.0\.1:\d+ speaks TLS: connect with tls/, e.message);
      } finally {
        client.close();
      }
    });
  });

  test("an expired server certificate fails saying it expired", async () => {
    // dex refuses to start with an expired certificate, so an HTTP/2 TLS
    // listener of node's presents it: the handshake fails before any HTTP/2.
    const h2 = http2.createSecureServer({ cert: fs.readFileSync(certs.pem("expired")), key: fs.readFileSync(certs.key("expired")) });
    await new Promise<void>((resolve) => h2.listen(0, "127.0.0.1", resolve));
    const address = `127.0.0.1:${(h2.address() as { port: number }).port}`;
    try {
      await withTlsEnv({}, async () => {
        const client = new Client({ addresses: [address], timeoutMs: 5_000, caFile: certs.pem("ca") });
        try {
          const e = await rejection(client.describeFlow("ts-tls-x"));
          assert.equal(e.code, "UNAVAILABLE", e.message);
          assert.match(e.message, /TLS: the server's certificate has expired/, e.message);
        } finally {
          client.close();
        }
      });
    } finally {
      h2.close();
    }
  });

  test("bad files fail at construction, naming the option and the path", async () => {
    await withTlsEnv({}, () => {
      const missing = path.join(dir, "no-such-ca.pem");
      assert.throws(
        () => new Client({ caFile: missing }),
        (e: unknown) => e instanceof DexError && e.code === "INVALID_ARGUMENT" && e.message.includes(`caFile: cannot read '${missing}' (no such file)`),
      );
      assert.throws(() => new Worker({ certFile: missing, keyFile: certs.key("client") }), new RegExp(`certFile: cannot read '${missing}'`));
      assert.throws(() => new Client({ certFile: certs.pem("client") }), /certFile is set without keyFile/);
      assert.throws(() => new Client({ caFile: certs.key("ca") }), /caFile '.*ca\.key' holds no PEM certificate/);
      assert.throws(
        () => new Client({ certFile: certs.pem("client"), keyFile: certs.key("other-client") }),
        /keyFile '.*other-client\.key' is not the key of the certificate in certFile/,
      );
      assert.throws(
        () => new Client({ certFile: certs.pem("expired-client"), keyFile: certs.key("expired-client") }),
        /certFile '.*expired-client\.pem': the client certificate expired on/,
      );
    });
    await withTlsEnv({ DEX_TLS_CA_FILE: path.join(dir, "gone.pem") }, () => {
      assert.throws(() => new Client({}), /\$DEX_TLS_CA_FILE: cannot read '.*gone\.pem' \(no such file\)/);
    });
  });
});

describe("failover over mutual TLS", () => {
  test("a Client and a Worker follow a hot standby's takeover after a SIGKILL of the active process", async () => {
    const dir = ServeProcess.makeDir();
    const certs = makeCerts(path.join(dir, "certs"));
    const tlsBlock =
      `  tls:\n    certFile: ${JSON.stringify(certs.pem("server"))}\n    keyFile: ${JSON.stringify(certs.key("server"))}\n` +
      `    clientCaFile: ${JSON.stringify(certs.pem("ca"))}\n    clientAuth: required\n`;
    const a = new ServeProcess(dir, "a", await freePort(), "3s", tlsBlock);
    const b = new ServeProcess(dir, "b", await freePort(), "3s", tlsBlock);
    const mtls: TlsOptions = { caFile: certs.pem("ca"), certFile: certs.pem("client"), keyFile: certs.key("client") };
    let w: Worker | undefined;
    let ran: Promise<void> | undefined;
    let client: Client | undefined;
    try {
      a.start();
      await a.waitForLine("dex-server-zd serve ready", 60_000);
      b.start();
      await b.waitForLine("API on", 30_000);
      // b's health over mutual TLS: a hot standby.
      const credentials = grpc.credentials.createSsl(
        fs.readFileSync(certs.pem("ca")),
        fs.readFileSync(certs.key("client")),
        fs.readFileSync(certs.pem("client")),
      );
      const health = new grpc.Client(b.address, credentials);
      try {
        await eventually("b to be a hot standby", async () => (await checkReadiness(health, "dex.HotStandby", Date.now() + 1_000)) === "serving", 60_000);
      } finally {
        health.close();
      }
      await withTlsEnv({}, async () => {
        const addresses = [b.address, a.address]; // the standby first
        const logger = new MemoryLogger();
        w = new Worker({ addresses, logger, reconnectBackoffInitialMs: 20, reconnectBackoffMaxMs: 200, shutdownTimeoutMs: 5_000, ...mtls });
        w.host(DONE);
        ran = w.run();
        await w.ready();
        assert.equal(w.stats().connectedAddress, a.address);
        client = new Client({ addresses, timeoutMs: 30_000, ...mtls });
        const first = await client.startFlowAndWait(DONE, "ts-tls-ha-1", { n: 1 }, { waitTimeoutMs: 20_000 });
        assert.equal(first.flow.status, "COMPLETED");
        assert.equal(client.preferredAddress, a.address);
        await a.kill9();
        const second = await client.startFlowAndWait(DONE, "ts-tls-ha-2", { n: 2 }, { waitTimeoutMs: 30_000 });
        assert.equal(second.flow.status, "COMPLETED", logger.lines.join("\n"));
        assert.equal(client.preferredAddress, b.address);
        assert.equal(w.stats().connectedAddress, b.address);
      });
    } finally {
      client?.close();
      if (w !== undefined) await w.shutdown();
      await ran;
      await a.kill9();
      await b.kill9();
    }
  });
});

describe("TLS options", () => {
  test("the options win over the environment, tls: false means plaintext whatever it says, and wrong values are named", () => {
    const env = { DEX_TLS_CA_FILE: "/env/ca.pem", DEX_TLS_SERVER_NAME: "env.example" };
    const resolved = resolveTls({ caFile: "/opt/ca.pem" }, env);
    assert.deepEqual(resolved?.caFile, { value: "/opt/ca.pem", what: "caFile" });
    assert.deepEqual(resolved?.serverName, { value: "env.example", what: "$DEX_TLS_SERVER_NAME" });
    assert.equal(resolveTls({ tls: false }, { ...env, DEX_TLS: "1" }), undefined);
    assert.equal(resolveTls({}, {}), undefined);
    assert.equal(resolveTls({}, { DEX_TLS: "no" }), undefined);
    assert.deepEqual(resolveTls({}, { DEX_TLS: "yes" }), {});
    assert.deepEqual(resolveTls({ tls: true }, {}), {});
    assert.throws(() => resolveTls({}, { DEX_TLS_KEY_FILE: "/k" }), /\$DEX_TLS_KEY_FILE is set without certFile/);
    assert.throws(() => resolveTls({ serverName: "a b" }, {}), /serverName 'a b' is not a DNS name or an IP address/);
  });

  test("only a connection failure that does not say why is diagnosed; over plaintext, only 'Failed to connect'", () => {
    const failed = "No connection established. Last error: Failed to connect (2026-12-06T00:00:00.000Z). Resolution note: ";
    assert.equal(wantsDiagnosis(failed, true), true);
    assert.equal(wantsDiagnosis(failed, false), true);
    assert.equal(wantsDiagnosis("Connection dropped", true), true);
    assert.equal(wantsDiagnosis("Connection dropped", false), false);
    assert.equal(wantsDiagnosis("No connection established. Last error: connect ECONNREFUSED 127.0.0.1:1", true), false);
    assert.equal(wantsDiagnosis("No connection established. Last error: Error: unable to verify the first certificate", true), false);
  });
});

describe("TLS failure hints", () => {
  test("each handshake failure grpc-js reports is recognised as its own", () => {
    const cases: [string, RegExp | undefined][] = [
      ["No connection established. Last error: Error: unable to verify the first certificate", /not signed by the CA in caFile/],
      ["No connection established. Last error: Error: self-signed certificate in certificate chain", /not signed by the CA in caFile/],
      ["Hostname/IP does not match certificate's altnames: Host: x. is not in the cert's altnames: DNS:localhost", /not for the name dialled/],
      ["No connection established. Last error: Error: certificate has expired", /server's certificate has expired/],
      ["error:0A00045C:SSL routines::tlsv13 alert certificate required", /requires a client certificate/],
      ["error:0A000418:SSL routines::tlsv1 alert unknown ca", /refused this client's certificate/],
      ["error:0A00010B:SSL routines::wrong version number", /does not speak TLS/],
      ["No connection established. Last error: connect ECONNREFUSED 127.0.0.1:1", undefined],
    ];
    for (const [details, hint] of cases) {
      const found = tlsFailureHint(details);
      if (hint === undefined) assert.equal(found, undefined, details);
      else assert.match(found ?? "", hint, details);
    }
  });
});
