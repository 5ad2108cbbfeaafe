// Test helpers: a real `dex-server-zd dev` on a free loopback port with a
// temporary data directory, started, killed and restarted by the tests.
// Every wait is bounded; every process started here is killed when the test
// process exits, whatever ends it.
import { spawn, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";

const PACKAGE_ROOT = path.resolve(__dirname, "..", "..");
export const REPO_ROOT = path.resolve(PACKAGE_ROOT, "..", "..");
export const BIN_DIR = path.resolve(process.env["DEX_BIN_DIR"] ?? path.join(REPO_ROOT, "build", "bin"));
const READY = "dex-server-zd dev ready";

const live = new Set<ChildProcess>();
const dataDirs = new Set<string>();
function killAll(): void {
  for (const child of live) child.kill("SIGKILL");
  for (const dir of dataDirs) fs.rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
}
process.on("exit", killAll);
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    killAll();
    process.exit(1);
  });
}

export function binary(name: string): string {
  const file = path.join(BIN_DIR, name);
  if (!fs.existsSync(file)) {
    throw new Error(`${file} is missing: build dex first (scripts/build), or set DEX_BIN_DIR`);
  }
  return file;
}

/** A loopback port nothing listens on (bound, then released). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address() as net.AddressInfo;
      server.close(() => resolve(address.port));
    });
  });
}

export class DevServer {
  readonly dataDir: string;
  port = 0;
  private child: ChildProcess | undefined;
  private lines: string[] = [];
  private exited: Promise<number | null> = Promise.resolve(null);
  /** More flags of `dex-server-zd dev` (`--config FILE`), kept for a restart. */
  private extraArgs: string[] = [];

  private constructor(dataDir: string) {
    this.dataDir = dataDir;
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** Starts a dev server on a free port (or `port`) with a fresh data directory. */
  static async start(options: { port?: number; durability?: string; args?: string[] } = {}): Promise<DevServer> {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "dex-sdk-ts-"));
    dataDirs.add(dataDir);
    const server = new DevServer(dataDir);
    server.port = options.port ?? 0;
    server.extraArgs = options.args ?? [];
    await server.launch(options.durability);
    return server;
  }

  /** Starts the server again on the same data directory and port. */
  async restart(): Promise<void> {
    await this.launch();
  }

  private launch(durability?: string): Promise<void> {
    const args = ["dev", "--data-dir", this.dataDir, "--listen", `127.0.0.1:${this.port}`];
    if (durability !== undefined) args.push("--durability", durability);
    args.push(...this.extraArgs);
    const child = spawn(binary("dex-server-zd"), args, { stdio: ["ignore", "pipe", "pipe"] });
    this.child = child;
    live.add(child);
    this.exited = new Promise((resolve) => {
      child.once("exit", (code) => {
        live.delete(child);
        resolve(code);
      });
    });
    return new Promise<void>((resolve, reject) => {
      let buffered = "";
      let settled = false;
      const timer = setTimeout(() => {
        if (settled) return;
        settled = true;
        reject(new Error(`no "${READY}" within 30 s; output:\n${this.output()}`));
      }, 30_000);
      const onData = (chunk: Buffer): void => {
        buffered += chunk.toString("utf8");
        let newline: number;
        while ((newline = buffered.indexOf("\n")) >= 0) {
          const line = buffered.slice(0, newline);
          buffered = buffered.slice(newline + 1);
          this.lines.push(line);
          if (!settled && line.includes(READY)) {
            const match = /listening on 127\.0\.0\.1:(\d+)/.exec(line);
            if (match !== null) this.port = Number(match[1]);
            settled = true;
            clearTimeout(timer);
            resolve();
          }
        }
      };
      child.stdout?.on("data", onData);
      child.stderr?.on("data", onData);
      void this.exited.then((code) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        reject(new Error(`dex-server-zd dev exited with ${code} before it was ready; output:\n${this.output()}`));
      });
    });
  }

  output(): string {
    return this.lines.join("\n");
  }

  /** kill -9, and wait until it is gone. */
  async kill9(): Promise<void> {
    this.child?.kill("SIGKILL");
    await this.exited;
  }

  /** SIGTERM (releases the lease), SIGKILL after 10 s; removes the data directory. */
  async stop(): Promise<void> {
    const child = this.child;
    if (child !== undefined && child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await this.exited;
      clearTimeout(timer);
    }
    fs.rmSync(this.dataDir, { recursive: true, force: true });
    dataDirs.delete(this.dataDir);
  }
}

/** Polls `predicate` every 20 ms until it holds; throws after `timeoutMs` naming `what`. */
export async function eventually(what: string, predicate: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await predicate()) return;
    if (Date.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A logger that keeps the lines (and prints them when DEX_TEST_VERBOSE is set). */
export class MemoryLogger {
  readonly lines: string[] = [];
  private add(level: string, message: string): void {
    this.lines.push(`${level} ${message}`);
    if (process.env["DEX_TEST_VERBOSE"]) console.error(`${level} ${message}`);
  }
  debug(message: string): void {
    this.add("debug", message);
  }
  info(message: string): void {
    this.add("info", message);
  }
  warn(message: string): void {
    this.add("warn", message);
  }
  error(message: string): void {
    this.add("error", message);
  }
}

/**
 * A `dex-server-zd serve` process of a node whose object store is a directory
 * (a hot standby when another process holds the lease). Killed when the test
 * process exits.
 */
export class ServeProcess {
  readonly address: string;
  private readonly configFile: string;
  private child: ChildProcess | undefined;
  private lines: string[] = [];
  private waiters: (() => void)[] = [];
  private exited: Promise<number | null> = Promise.resolve(null);

  /** `apiExtra`: more lines under `api:` (indented two spaces), e.g. a `tls:` block. */
  constructor(dir: string, name: string, port: number, leaseDuration: string, apiExtra = "") {
    this.address = `127.0.0.1:${port}`;
    this.configFile = path.join(dir, `${name}.yaml`);
    fs.writeFileSync(
      this.configFile,
      `nodeId: node-ts\napi:\n  listen: ${this.address}\n${apiExtra}` +
        `objectStore:\n  type: filesystem\n  path: ${path.join(dir, "objects")}\n  durability: processCrashSafe\n` +
        `localStore:\n  path: ${path.join(dir, `${name}-local`)}\nlease:\n  duration: ${leaseDuration}\n` +
        `standby:\n  mode: hot\n`,
    );
  }

  /** A fresh directory for the processes of one node, removed when the test process exits. */
  static makeDir(): string {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "dex-sdk-ts-serve-"));
    dataDirs.add(dir);
    return dir;
  }

  start(): void {
    const child = spawn(binary("dex-server-zd"), ["serve", "--config", this.configFile], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.child = child;
    live.add(child);
    this.exited = new Promise((resolve) => {
      child.once("exit", (code) => {
        live.delete(child);
        resolve(code);
        for (const w of this.waiters.splice(0)) w();
      });
    });
    let buffered = "";
    const onData = (chunk: Buffer): void => {
      buffered += chunk.toString("utf8");
      let newline: number;
      while ((newline = buffered.indexOf("\n")) >= 0) {
        this.lines.push(buffered.slice(0, newline));
        buffered = buffered.slice(newline + 1);
      }
      for (const w of this.waiters.splice(0)) w();
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
  }

  /** Resolves with the first output line containing `needle`; rejects after `timeoutMs`. */
  async waitForLine(needle: string, timeoutMs: number): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const line = this.lines.find((l) => l.includes(needle));
      if (line !== undefined) return line;
      const left = deadline - Date.now();
      if (left <= 0 || this.child?.exitCode != null || this.child?.signalCode != null) {
        throw new Error(`no line with "${needle}" within ${timeoutMs} ms; output:\n${this.output()}`);
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 200));
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  signal(signal: NodeJS.Signals): void {
    this.child?.kill(signal);
  }

  /** SIGKILL (a stopped process too), and wait until it is gone. */
  async kill9(): Promise<void> {
    const child = this.child;
    if (child !== undefined && child.exitCode === null && child.signalCode === null) {
      child.kill("SIGKILL");
      await this.exited;
    }
  }

  output(): string {
    return this.lines.join("\n");
  }
}
