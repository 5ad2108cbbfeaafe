// The dex example Flows in TypeScript (the C++ twins: examples/flows/) and a
// driver that plays the outside world of each example against a Worker that
// hosts them: the seller approving an order, the user typing the code.
import { randomBytes } from "node:crypto";

import { DexError, type Channel, type Client, type Flow, type FlowDescription } from "dex-sdk";

import { orderProcessing, sellerApproval } from "./order-processing";
import { parallelQuotes } from "./parallel-quotes";
import { signUp, verify } from "./signup";

export { orderProcessing, parallelQuotes, signUp };

export const allFlows: Flow[] = [orderProcessing, signUp, parallelQuotes];

export type ExampleName = "order" | "order-refund" | "signup" | "quotes";
export const EXAMPLES: ExampleName[] = ["order", "order-refund", "signup", "quotes"];

/** One line of what a driver did ("started", "step-completed", "published", "result"). */
export type DriveEvent = Record<string, unknown> & { event: string };

export interface DriveResult {
  flow: FlowDescription;
  /** The messages the driver saw acknowledged, in order. */
  published: unknown[];
  /** The messages the run's history shows published by clients, in order. */
  historyPublishes: unknown[];
}

const SCENARIO_TIMEOUT_MS = 120_000;

/**
 * Repeats `call` while no process serves (a restart or a failover) until the
 * scenario's deadline. Every call given here is safe to repeat: starts and
 * publishes carry one request ID across their repeats.
 */
async function retried<T>(what: string, call: () => Promise<T>): Promise<T> {
  const end = Date.now() + SCENARIO_TIMEOUT_MS;
  for (;;) {
    try {
      return await call();
    } catch (error) {
      if (!(error instanceof DexError) || error.code !== "UNAVAILABLE" || Date.now() >= end) {
        throw new Error(`${what}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}

/** The input of each example, with durations short enough for a test. */
export function exampleInput(example: ExampleName, flowId: string): { flow: Flow; input: unknown } {
  switch (example) {
    case "order":
    case "order-refund":
      return {
        flow: orderProcessing,
        input: { order: flowId, amount: 42, failCharges: 2, reminderMs: 500, failShipping: example === "order-refund" },
      };
    case "signup":
      return { flow: signUp, input: { email: "ann@example.com", code: "123456", resendMs: 500, maxSends: 10 } };
    case "quotes":
      return {
        flow: parallelQuotes,
        input: { parcel: flowId, delaysMs: { A: 100, B: 300, C: 600_000 }, prices: { A: 12, B: 9, C: 5 }, settleMs: 100 },
      };
  }
}

/** Runs one example end to end: start, the outside world's part, the wait, the history. */
export async function drive(
  client: Client,
  example: ExampleName,
  flowId: string,
  emit: (e: DriveEvent) => void = () => undefined,
): Promise<DriveResult> {
  const { flow, input } = exampleInput(example, flowId);
  const requestId = randomBytes(16).toString("hex");
  const started = await retried("start", () =>
    client.startFlow(flow, flowId, input, { requestId, ignoreAlreadyStarted: true }),
  );
  emit({ event: "started", flowType: flow.type, flowId, runId: started.runId });
  const published: unknown[] = [];
  const waitStep = async (step: string): Promise<void> => {
    const done = await retried("wait for a Step", () =>
      client.waitForStepCompletion(flowId, step, { timeoutMs: SCENARIO_TIMEOUT_MS }),
    );
    if (!done.completed) throw new Error(`${step} did not complete in time`);
    emit({ event: "step-completed", step, phase: done.phase });
  };
  const publish = async <T>(channel: Channel<T>, message: T): Promise<void> => {
    const id = randomBytes(16).toString("hex"); // one ID across the repeats
    await retried("publish", () => client.publishToChannel(flowId, channel, [message], { requestId: id }));
    published.push(message);
    emit({ event: "published", channel: channel.name, message });
  };
  if (flow === orderProcessing) {
    await waitStep("Ship-1"); // the first reminder fired: Ship-2 waits
    await publish(sellerApproval, { seller: "s-1" });
  } else if (flow === signUp) {
    await waitStep("AwaitVerification-1"); // a resend
    await publish(verify, { code: "000000" });
    await publish(verify, { code: "123456" });
  }
  const closed = await retried("wait", () => client.waitForFlow(flowId, { timeoutMs: SCENARIO_TIMEOUT_MS }));
  const historyPublishes: unknown[] = [];
  await retried("history", async () => {
    historyPublishes.length = 0;
    for await (const e of client.iterateHistoryEvents(flowId)) {
      if (e.kind === "CHANNEL_PUBLISHED") historyPublishes.push(...(e.publish?.messages ?? []));
    }
  });
  emit({ event: "result", flowId, status: closed.status, outputs: closed.outputs, runs: closed.runs, historyPublishes });
  return { flow: closed, published, historyPublishes };
}
