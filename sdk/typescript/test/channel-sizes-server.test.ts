// Channel sizes against a real dex-server-zd dev: a client publishes to a
// Channel and to two instances of a ChannelMap; an RPC handler and a Step
// read how many messages wait (ctx.channelSize), how many instances hold
// some (ctx.channelMapSize) and which (ctx.channelInstanceKeys); what the
// task itself publishes counts too. Also the task-level view without a server.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { Channel, ChannelMap, Client, Flow, Wait, gracefulComplete, runFlowTask, type Step } from "../src/index";
import type { TaskContext } from "../src/flow/context";
import { startLiveStack, type LiveStack } from "./live-stack";
import { text, wireTask } from "./task-fixture";

const inbox = new Channel<number | string>("inbox");
const go = new Channel<boolean>("go");
const orders = new ChannelMap<string>("orders");

function sizes(ctx: TaskContext): Record<string, unknown> {
  return {
    inbox: ctx.channelSize(inbox),
    a: ctx.channelSize(orders.instance("a")),
    orders: ctx.channelMapSize(orders),
    keys: ctx.channelInstanceKeys(orders),
  };
}

const read: Step = {
  type: "Read",
  waitFor: () => Wait.anyOf(go.forOne()),
  execute(ctx) {
    const before = sizes(ctx);
    ctx.publish(inbox, "more");
    ctx.publish(orders.instance("z"), "more");
    return gracefulComplete({ before, after: sizes(ctx), go: ctx.channelSize(go) });
  },
};
const SIZES = new Flow({
  type: "ts-channel-sizes",
  startStep: read,
  steps: [read],
  channels: [inbox, go, orders],
  rpcs: [{ name: "sizes", handler: (ctx) => ({ output: sizes(ctx) }) }],
});

describe("Channel sizes in a task", () => {
  const never = new AbortController().signal;
  const task = wireTask(
    { flowType: "ts-channel-sizes", stepType: "Read", stepExecutionId: "Read-1" },
    {
      channelSizes: [
        { channel: "inbox", instanceKey: "", size: 3 },
        { channel: "orders", instanceKey: "a", size: 2 },
        { channel: "orders", instanceKey: "b", size: 1 },
      ],
    },
  );

  test("a Step counts the task's queues and what it publishes itself", async () => {
    const r = await runFlowTask(SIZES, task, never, () => true);
    assert.equal(r.error, undefined);
    const out = JSON.parse(text(r.decision?.gracefulComplete)) as unknown;
    assert.deepEqual(out, {
      before: { inbox: 3, a: 2, orders: 2, keys: ["a", "b"] },
      after: { inbox: 4, a: 2, orders: 3, keys: ["a", "b", "z"] },
      go: 0,
    });
  });

  test("a task whose list was cut fails the method non-retryably instead of answering a wrong size", async () => {
    const r = await runFlowTask(SIZES, { ...task, channelSizesTruncated: true }, never, () => true);
    assert.equal(r.error?.nonRetryable, true);
    assert.match(r.error?.message ?? "", /inbox.*10,000/);
  });
});

describe("Channel sizes on a dex server", () => {
  let stack: LiveStack;
  let client: Client;

  before(async () => {
    stack = await startLiveStack(SIZES);
    client = stack.client;
  });

  after(async () => {
    await stack?.stop();
  });

  test("an RPC and a Step read the sizes of what a client published, and count their own publishes", async () => {
    const flowId = `sizes-${process.pid}`;
    await client.startFlow(SIZES, flowId, {});
    await client.publishToChannel(flowId, inbox, [1, 2, 3]);
    await client.publishToChannel(flowId, orders.instance("a"), ["a1", "a2"]);
    await client.publishToChannel(flowId, orders.instance("b"), ["b1"]);
    const rpc = await client.invokeRpc(flowId, "sizes", {});
    assert.deepEqual(rpc.output, { inbox: 3, a: 2, orders: 2, keys: ["a", "b"] });

    await client.publishToChannel(flowId, go, [true]);
    const closed = await client.waitForFlow(flowId, { timeoutMs: 30_000 });
    assert.equal(closed.status, "COMPLETED", closed.closeReason);
    assert.deepEqual(closed.output, {
      before: { inbox: 3, a: 2, orders: 2, keys: ["a", "b"] },
      after: { inbox: 4, a: 2, orders: 3, keys: ["a", "b", "z"] },
      go: 0,
    });
  });
});
