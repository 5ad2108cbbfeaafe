// dex-flow-examples in TypeScript: the example Flows (index.ts) as a program.
//
//   node dist-test/examples/flows/main.js worker [--server ADDR]... [TLS]
//   node dist-test/examples/flows/main.js drive order|order-refund|signup|quotes --flow-id ID [--server ADDR]... [TLS]
//
// TLS: --tls, --ca-file FILE, --cert-file FILE, --key-file FILE,
// --server-name NAME, as dexcli's (docs/cli.md, "TLS"), each defaulting to
// its DEX_TLS* variable.
//
// `drive` prints JSON lines (what it did, then {"event":"result",...}) and
// exits 0 when the run completed, 1 otherwise, 2 on usage errors. Both keep
// going through a restart or a failover of the server.
import { Client, DexError, type TlsOptions, Worker } from "dex-sdk";

import { allFlows, drive, EXAMPLES, type ExampleName } from "./index";

function usage(message: string): never {
  console.error(`dex-flow-examples: ${message}`);
  console.error(
    "usage: main.js worker [--server ADDR]... [TLS] | main.js drive <example> --flow-id ID [--server ADDR]... [TLS]\n" +
      "TLS: [--tls] [--ca-file FILE] [--cert-file FILE --key-file FILE] [--server-name NAME]",
  );
  process.exit(2);
}

/** Options refused by the constructor (a TLS file that cannot be used, a bad address) are a usage error. */
function construct<T>(make: () => T): T {
  try {
    return make();
  } catch (error) {
    if (error instanceof DexError && error.code === "INVALID_ARGUMENT") usage(error.details);
    throw error;
  }
}

async function main(argv: string[]): Promise<number> {
  const servers: string[] = [];
  const positional: string[] = [];
  let flowId = "";
  const tls: TlsOptions = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === "--server") servers.push(...(argv[++i] ?? usage("--server needs an address")).split(","));
    else if (arg === "--flow-id") flowId = argv[++i] ?? usage("--flow-id needs an ID");
    else if (arg === "--tls") tls.tls = true;
    else if (arg === "--ca-file") tls.caFile = argv[++i] ?? usage("--ca-file needs a file");
    else if (arg === "--cert-file") tls.certFile = argv[++i] ?? usage("--cert-file needs a file");
    else if (arg === "--key-file") tls.keyFile = argv[++i] ?? usage("--key-file needs a file");
    else if (arg === "--server-name") tls.serverName = argv[++i] ?? usage("--server-name needs a name");
    else positional.push(arg);
  }
  if (servers.length === 0) servers.push("127.0.0.1:8801");
  const [command, example] = positional;
  if (command === "worker") {
    const worker = construct(() => new Worker({ addresses: servers, logger: console, ...tls }));
    for (const flow of allFlows) worker.host(flow);
    for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => void worker.shutdown());
    console.log(`dex-flow-examples worker ${worker.workerId} hosts ${allFlows.map((f) => f.type).join(", ")}`);
    await worker.run();
    return 0;
  }
  if (command !== "drive") usage("the command is worker or drive");
  if (!EXAMPLES.includes(example as ExampleName)) usage(`the example is one of ${EXAMPLES.join(", ")}`);
  if (flowId === "") usage("drive needs --flow-id");
  const client = construct(() => new Client({ addresses: servers, ...tls }));
  const start = Date.now();
  try {
    const result = await drive(client, example as ExampleName, flowId, (e) =>
      console.log(JSON.stringify({ ...e, ms: Date.now() - start })),
    );
    return result.flow.status === "COMPLETED" ? 0 : 1;
  } finally {
    client.close();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.log(JSON.stringify({ event: "error", message: error instanceof Error ? error.message : String(error) }));
    process.exit(1);
  },
);
