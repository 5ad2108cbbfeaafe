// dex-flow-examples in TypeScript: the example Flows (index.ts) as a program.
//
//   node dist-test/examples/flows/main.js worker [--server ADDR]...
//   node dist-test/examples/flows/main.js drive order|order-refund|signup|quotes --flow-id ID [--server ADDR]...
//
// `drive` prints JSON lines (what it did, then {"event":"result",...}) and
// exits 0 when the run completed, 1 otherwise, 2 on usage errors. Both keep
// going through a restart or a failover of the server.
import { Client, Worker } from "dex-sdk";

import { allFlows, drive, EXAMPLES, type ExampleName } from "./index";

function usage(message: string): never {
  console.error(`dex-flow-examples: ${message}`);
  console.error("usage: main.js worker [--server ADDR]... | main.js drive <example> --flow-id ID [--server ADDR]...");
  process.exit(2);
}

async function main(argv: string[]): Promise<number> {
  const servers: string[] = [];
  const positional: string[] = [];
  let flowId = "";
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === "--server") servers.push(...(argv[++i] ?? usage("--server needs an address")).split(","));
    else if (arg === "--flow-id") flowId = argv[++i] ?? usage("--flow-id needs an ID");
    else positional.push(arg);
  }
  if (servers.length === 0) servers.push("127.0.0.1:8801");
  const [command, example] = positional;
  if (command === "worker") {
    const worker = new Worker({ addresses: servers, logger: console });
    for (const flow of allFlows) worker.host(flow);
    for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => void worker.shutdown());
    console.log(`dex-flow-examples worker ${worker.workerId} hosts ${allFlows.map((f) => f.type).join(", ")}`);
    await worker.run();
    return 0;
  }
  if (command !== "drive") usage("the command is worker or drive");
  if (!EXAMPLES.includes(example as ExampleName)) usage(`the example is one of ${EXAMPLES.join(", ")}`);
  if (flowId === "") usage("drive needs --flow-id");
  const client = new Client({ addresses: servers });
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
