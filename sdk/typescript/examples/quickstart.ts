// The README's example: a Worker that serves the task queue "greetings" and a
// Client that runs one flow of two Steps through it, against a running
// `dex-server-zd dev` (DEX_ADDRESS, default 127.0.0.1:8801).
import { Client, StepFailure, Worker } from "dex-sdk";

const address = process.env["DEX_ADDRESS"] ?? "127.0.0.1:8801";

// A flow type as the server takes it (YAML or JSON text): "sign" runs after
// "shout" and gets its output.
const greet = `
name: greet
steps:
  - name: shout
    taskQueue: greetings
    startToCloseTimeout: 10s
  - name: sign
    taskQueue: greetings
    after: [shout]
    retry:
      maxAttempts: 3
      initialInterval: 200ms
`;

interface GreetInput {
  name: string;
}

async function main(): Promise<void> {
  const worker = new Worker({ addresses: [address], maxConcurrentTasks: 4 });
  worker.handle<GreetInput>("greetings", async (task) => {
    switch (task.step) {
      case "shout":
        return { text: `HELLO, ${task.flowInput.name.toUpperCase()}!` };
      case "sign": {
        const shout = task.stepOutputs["shout"] as { text: string };
        return { text: `${shout.text} (signed by ${task.flowType}, attempt ${task.attempt})` };
      }
      default:
        throw new StepFailure(`unknown step ${task.step}`, { nonRetryable: true });
    }
  });
  worker.registerFlowType(greet); // registered by run() before it serves
  const running = worker.run();
  await worker.ready();

  const client = new Client({ addresses: [address] });
  try {
    const { flowId } = await client.startFlow({ flowType: "greet", input: { name: "Ada" } });
    const flow = await client.waitFlow(flowId, { timeoutMs: 30_000 });
    console.log(`${flow.status} ${JSON.stringify(flow.output)}`);
    // COMPLETED {"text":"HELLO, ADA! (signed by greet, attempt 1)"}
  } finally {
    client.close();
    await worker.shutdown(); // finishes running tasks and waits for their acks
    await running;
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
