// The load driver of bench/peers, the same program for both systems: `concurrency` closed
// loops, each starting a flow and waiting for its end, then the next. A warm-up is discarded;
// a flow counts when it started and ended inside the measured period. The CPU seconds of the
// server and worker processes (utime+stime from /proc/<pid>/stat) and of this process are
// read at the start and the end of the measured period.
//
//   node driver.mjs load --system dex --address 127.0.0.1:8801 --flow-type peers-one \
//        --concurrency 64 --warmup 3 --seconds 20 --pids server=123,worker=456
//   node driver.mjs load --system dex ... --one-call 1   (StartFlow waits for the run's end)
//   node driver.mjs load --system restate --url http://127.0.0.1:8080/bench/one ...
//   node driver.mjs probe --system dex|restate ... --timeout 30   (one flow, retried until it completes)
//   node driver.mjs rtt --grpc 127.0.0.1:8801 --seconds 1       (gRPC health Check)
//   node driver.mjs rtt --http http://127.0.0.1:8080/restate/health --seconds 1
//
// dex: dex.FlowService StartFlow with a fresh flow ID, then WaitForFlow until the run
// closed; with --one-call 1, StartFlow with wait_timeout_ms waits for the end itself (one
// round trip instead of two; WaitForFlow only if the wait ended first). One gRPC channel,
// i.e. one HTTP/2 connection, for all loops. Restate: one HTTP/1.1 POST to the handler on the
// ingress (the request/response invocation: it answers when the handler has returned),
// keep-alive connections, one per loop. Prints one JSON object on its last line.
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";
import grpc from "@grpc/grpc-js";
import protoLoader from "@grpc/proto-loader";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, "..", "..");

function parseArgs(argv) {
  const out = { _: [] };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i].startsWith("--")) out[argv[i].slice(2)] = argv[++i];
    else out._.push(argv[i]);
  }
  return out;
}

function die(message) {
  console.error(`driver: FAILED: ${message}`);
  process.exit(1);
}

const nowMs = () => Number(process.hrtime.bigint()) / 1e6;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function cpuSeconds(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" "); // fields[0] is field 3
  const ticks = Number(fields[14 - 3]) + Number(fields[15 - 3]);
  return ticks / 100; // USER_HZ: 100 on Linux
}

function selfCpuSeconds() {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

function quantile(sorted, p) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

function summary(latencies) {
  const s = Float64Array.from(latencies).sort();
  return { n: s.length, p50: quantile(s, 0.5), p90: quantile(s, 0.9), p99: quantile(s, 0.99),
           max: s.length ? s[s.length - 1] : NaN };
}

function loadProto(file, includeDirs) {
  const def = protoLoader.loadSync(file, { keepCase: false, longs: String, enums: String,
                                           defaults: true, oneofs: true, includeDirs });
  return grpc.loadPackageDefinition(def);
}

function unary(client, method, request, deadlineMs) {
  return new Promise((resolve, reject) => {
    client[method](request, { deadline: Date.now() + deadlineMs }, (err, res) =>
      err ? reject(err) : resolve(res));
  });
}

// One flow on dex: StartFlow (dex.FlowService) with a fresh flow ID, then WaitForFlow until
// the run closed; --one-call 1: StartFlow waits for the run's end in the same call
// (wait_timeout_ms). Resolves, or throws why not.
function dexRunner(args) {
  const protoRoot = path.join(REPO, "proto");
  // dex.FlowService is in api.proto (its messages in flow_api.proto, which it imports).
  const pkg = loadProto(path.join(protoRoot, "dex", "api.proto"), [protoRoot]);
  const client = new pkg.dex.FlowService(args.address, grpc.credentials.createInsecure());
  const flowType = args["flow-type"];
  const prefix = `${args["id-prefix"] ?? "peers"}-${process.pid}-`;
  const oneCall = args["one-call"] === "1";
  let seq = 0;
  return async (input) => {
    const flowId = prefix + seq++;
    const start = { flowId, flowType, input: { data: Buffer.from(JSON.stringify(input)) } };
    let res = oneCall ? await unary(client, "startFlow", { ...start, waitTimeoutMs: 30000 }, 40000)
                      : await unary(client, "startFlow", start, 30000);
    const runId = res.runId;
    while (!res.closed) {
      res = await unary(client, "waitForFlow", { flow: { flowId, runId: oneCall ? runId : "" },
                                                 timeoutMs: 30000 }, 40000);
    }
    if (res.flow.status !== "FLOW_COMPLETED") {
      throw new Error(`flow ${flowId} closed ${res.flow.status}: ${res.flow.closeReason}`);
    }
  };
}

// One invocation on Restate: POST to the handler on the ingress, answered when it returned.
function restateRunner(args, concurrency) {
  const url = new URL(args.url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  return (input) => new Promise((resolve, reject) => {
    const body = JSON.stringify(input);
    const req = http.request({ host: url.hostname, port: url.port, path: url.pathname,
                               method: "POST", agent,
                               headers: { "content-type": "application/json",
                                          "content-length": Buffer.byteLength(body) } },
                             (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => {
        if (res.statusCode === 200) resolve();
        else reject(new Error(`HTTP ${res.statusCode}: ${Buffer.concat(chunks).toString()}`));
      });
      res.on("error", reject);
    });
    req.setTimeout(60000, () => req.destroy(new Error("no answer within 60 s")));
    req.on("error", reject);
    req.end(body);
  });
}

function readPids(spec) {
  const pids = {};
  for (const part of (spec ?? "").split(",").filter(Boolean)) {
    const [name, pid] = part.split("=");
    pids[name] = Number(pid);
  }
  return pids;
}

function cpuOf(pids) {
  const out = {};
  for (const [name, pid] of Object.entries(pids)) out[name] = cpuSeconds(pid);
  out.driver = selfCpuSeconds();
  return out;
}

async function load(args) {
  const concurrency = Number(args.concurrency ?? 1);
  const warmupMs = Number(args.warmup ?? 3) * 1000;
  const measureMs = Number(args.seconds ?? 20) * 1000;
  const pids = readPids(args.pids);
  const run = runner(args, concurrency);

  const t0 = nowMs();
  const measureStart = t0 + warmupMs;
  const measureEnd = measureStart + measureMs;
  const latencies = [];
  const errors = [];
  let cpuStart = null;
  let cpuEnd = null;
  // The CPU readings at the period's edges, from a timer, not from a loop.
  const edges = (async () => {
    await sleep(Math.max(0, measureStart - nowMs()));
    cpuStart = cpuOf(pids);
    await sleep(Math.max(0, measureEnd - nowMs()));
    cpuEnd = cpuOf(pids);
  })();
  let n = 0;
  const loop = async (id) => {
    while (nowMs() < measureEnd) {
      const started = nowMs();
      try {
        await run({ n: n++, loop: id });
      } catch (err) {
        errors.push(String(err?.message ?? err));
        if (errors.length >= 100) return; // the row is broken: stop it
        await sleep(10);
        continue;
      }
      const ended = nowMs();
      if (started >= measureStart && ended <= measureEnd) latencies.push(ended - started);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, (_, i) => loop(i)));
  await edges;
  const cpu = {};
  for (const name of Object.keys(cpuEnd)) cpu[name] = cpuEnd[name] - cpuStart[name];
  return { mode: "load", system: args.system, concurrency, seconds: measureMs / 1000,
           flows: latencies.length, perSecond: latencies.length / (measureMs / 1000),
           latencyMs: summary(latencies), cpuSeconds: cpu, errors: errors.length,
           firstErrors: [...new Set(errors)].slice(0, 3) };
}

function runner(args, concurrency) {
  return args.system === "dex" ? dexRunner(args)
       : args.system === "restate" ? restateRunner(args, concurrency)
       : die(`--system dex|restate, not ${args.system}`);
}

// One flow, retried until it completes: the server, the worker or service and the flow type
// (on dex: declared by the Worker's hello) are all there.
async function probe(args) {
  const run = runner(args, 1);
  const deadline = nowMs() + Number(args.timeout ?? 30) * 1000;
  let tries = 0;
  for (;;) {
    tries++;
    const t = nowMs();
    try {
      await run({ probe: tries });
      return { mode: "probe", tries, latencyMs: nowMs() - t };
    } catch (err) {
      if (nowMs() > deadline) die(`probe: no flow completed after ${tries} tries: ${err?.message ?? err}`);
      await sleep(100);
    }
  }
}

// Round trips, one at a time, for `seconds`: gRPC health Check or an HTTP GET.
async function rtt(args) {
  const seconds = Number(args.seconds ?? 1);
  let call;
  let what;
  if (args.grpc) {
    // The repository's copy of grpc.health.v1 (proto/grpc/health/v1).
    const protoRoot = path.join(HERE, "..", "..", "proto");
    const pkg = loadProto(path.join(protoRoot, "grpc", "health", "v1", "health.proto"), [protoRoot]);
    const client = new pkg.grpc.health.v1.Health(args.grpc, grpc.credentials.createInsecure());
    call = () => unary(client, "check", { service: "" }, 5000);
    what = "gRPC health Check (grpc-js)";
  } else if (args.http) {
    const url = new URL(args.http);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    call = () => new Promise((resolve, reject) => {
      http.get({ host: url.hostname, port: url.port, path: url.pathname, agent }, (res) => {
        res.resume();
        res.on("end", () => (res.statusCode === 200 ? resolve() : reject(new Error(`HTTP ${res.statusCode}`))));
      }).on("error", reject);
    });
    what = "HTTP/1.1 GET, keep-alive (node:http)";
  } else {
    die("rtt needs --grpc ADDRESS or --http URL");
  }
  for (let i = 0; i < 50; i++) await call(); // connect and warm up
  const latencies = [];
  const end = nowMs() + seconds * 1000;
  while (nowMs() < end) {
    const t = nowMs();
    await call();
    latencies.push(nowMs() - t);
  }
  return { mode: "rtt", what, latencyMs: summary(latencies) };
}

const args = parseArgs(process.argv.slice(2));
const mode = args._[0];
const result = mode === "load" ? await load(args)
             : mode === "probe" ? await probe(args)
             : mode === "rtt" ? await rtt(args)
             : die("usage: driver.mjs load|probe|rtt ...");
console.log(JSON.stringify(result));
process.exit(0);
