// The Restate side of bench/peers: one service, "bench", whose handlers are the two flows
// of the benchmark as Restate writes them: sequential ctx.run steps, each trivial work
// (it returns the flow's input). Served over HTTP/2 on a loopback port; Restate calls it.
//
//   node bench/peers/restate/service.mjs --port 9080
//
// Prints "restate-service listening on 127.0.0.1:<port>" once it serves.
import http2 from "node:http2";
import * as restate from "@restatedev/restate-sdk";

// The SDK calls Promise.withResolvers (Node.js 22); Debian bookworm's Node.js is 20.
if (typeof Promise.withResolvers !== "function") {
  Promise.withResolvers = function withResolvers() {
    let resolve, reject;
    const promise = new this((res, rej) => {
      resolve = res;
      reject = rej;
    });
    return { promise, resolve, reject };
  };
}

function flag(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

const echo = (input) => () => input; // the Step's work: return the flow input

const bench = restate.service({
  name: "bench",
  handlers: {
    // A flow of one Step.
    one: async (ctx, input) => ctx.run("echo", echo(input)),
    // A flow of three sequential Steps: each ctx.run result is journaled before the next runs.
    three: async (ctx, input) => {
      await ctx.run("echo-1", echo(input));
      await ctx.run("echo-2", echo(input));
      return ctx.run("echo-3", echo(input));
    },
  },
});

const port = Number(flag("port", "9080"));
const server = http2.createServer(restate.createEndpointHandler({ services: [bench] }));
server.listen(port, "127.0.0.1", () => {
  console.log(`restate-service listening on 127.0.0.1:${server.address().port}`);
});
// Restate keeps its HTTP/2 sessions to the service open, so server.close() alone would wait for
// them forever: close them too (streams in flight finish, no new ones start), and exit after 2 s
// at the latest.
const sessions = new Set();
server.on("session", (session) => {
  sessions.add(session);
  session.on("close", () => sessions.delete(session));
});
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.once(signal, () => {
    server.close(() => process.exit(0));
    for (const session of sessions) session.close();
    setTimeout(() => process.exit(0), 2000).unref();
  });
}
