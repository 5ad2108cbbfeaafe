// A real `dex-server-zd dev`, a Worker hosting the test's Flows and a Client:
// the set-up every end-to-end Flow test shares.
import { Client, Worker } from "../src/index";
import { DevServer, MemoryLogger } from "./helpers";

type HostedFlow = Parameters<Worker["host"]>[0];

export interface LiveStack {
  server: DevServer;
  worker: Worker;
  client: Client;
  /** Closes the client, drains the Worker and stops the server. */
  stop(): Promise<void>;
}

export async function startLiveStack(...flows: HostedFlow[]): Promise<LiveStack> {
  const server = await DevServer.start();
  const worker = new Worker({ addresses: [server.address], logger: new MemoryLogger() });
  for (const flow of flows) worker.host(flow);
  void worker.run();
  await worker.ready();
  const client = new Client({ addresses: [server.address], timeoutMs: 10_000 });
  return {
    server,
    worker,
    client,
    async stop() {
      client.close();
      await worker.shutdown();
      await server.stop();
    },
  };
}
