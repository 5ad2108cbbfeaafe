// The README's example: a Worker that hosts the Flow "Greet" (Shout, then
// Sign, which waits for a signature on a Channel) and a Client that runs it,
// against a running `dex-server-zd dev` (DEX_ADDRESS, default 127.0.0.1:8801).
import { randomUUID } from "node:crypto";

import { Channel, Client, Flow, Timer, Wait, Worker, goTo, gracefulComplete, type Step } from "dex-sdk";

const address = process.env["DEX_ADDRESS"] ?? "127.0.0.1:8801";

interface Greeting {
  text: string;
}

// A durable queue of each run: clients publish to it, Steps wait on it.
const signatures = new Channel<{ signer: string }>("signatures");

// Runs at once and hands its text on to Sign.
const shout: Step<{ name: string }> = {
  type: "Shout",
  execute: (ctx) => goTo<Greeting>("Sign", { text: `HELLO, ${ctx.input.name.toUpperCase()}!` }),
};

// Waits (durably, on the server) for a signature or an hour, whichever comes first.
const sign: Step<Greeting> = {
  type: "Sign",
  options: { execute: { retry: { maximumAttempts: 3, initialIntervalMs: 200 } } },
  waitFor: () => Wait.anyOf(signatures.forOne(), Timer.after(3_600_000)),
  execute(ctx) {
    const [signature] = ctx.messages(signatures);
    const by = signature?.signer ?? "nobody: the hour passed";
    return gracefulComplete({ text: `${ctx.input.text} (signed by ${by}, attempt ${ctx.attempt})` });
  },
};

const greet = new Flow({ type: "Greet", startStep: shout, steps: [shout, sign], channels: [signatures] });

async function main(): Promise<void> {
  const worker = new Worker({ addresses: [address], maxConcurrentTasks: 4 }).host(greet);
  const running = worker.run();
  await worker.ready(); // its hello declared Greet durably

  const client = new Client({ addresses: [address] });
  try {
    const flowId = `greet-${randomUUID()}`;
    await client.startFlow(greet, flowId, { name: "Ada" });
    await client.publishToChannel(flowId, signatures, [{ signer: "Grace" }]);
    const run = await client.waitForFlow(flowId, { timeoutMs: 30_000 });
    console.log(`${run.status} ${JSON.stringify(run.output)}`);
    // COMPLETED {"text":"HELLO, ADA! (signed by Grace, attempt 1)"}
  } finally {
    client.close();
    await worker.shutdown(); // finishes running attempts and waits for their acks
    await running;
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
