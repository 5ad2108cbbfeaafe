// The README's Attributes, lock keys and RPCs example: a Flow "Shop" whose
// seats are an AttributeMap, an RPC that reserves one (under the lock key
// "inventory") and starts a Ship Step, and a Client that sets, reads and
// waits for Attributes; against a running `dex-server-zd dev` (DEX_ADDRESS,
// default 127.0.0.1:8801) whose engine has Attributes and RPCs (issue 15).
import { randomUUID } from "node:crypto";

import { Attribute, AttributeMap, Client, Flow, Rpc, Timer, Wait, Worker, deadEnd, gracefulComplete, type Step } from "dex-sdk";

const address = process.env["DEX_ADDRESS"] ?? "127.0.0.1:8801";

const stage = Attribute.string("stage");
const seats = AttributeMap.int64("seats");

// Keeps the run open until it is stopped: the RPCs do the work.
const open: Step = { type: "Open", waitFor: () => Wait.anyOf(Timer.after(3_600_000)), execute: () => deadEnd() };

const ship: Step<{ seat: string }> = {
  type: "Ship",
  attributeReads: [stage],
  options: { execute: { lockKeys: ["inventory"] } },
  execute(ctx) {
    stage.set(ctx, `shipped ${ctx.input.seat}`);
    return gracefulComplete({ seat: ctx.input.seat, before: stage.get(ctx) });
  },
};

const reserve = new Rpc<{ seat: string }, { left: number }>({
  name: "reserve",
  lockKeys: ["inventory"],
  attributeReads: [seats],
  handler(ctx, { seat }) {
    const left = (seats.get(ctx, seat) ?? 0) - 1;
    if (left < 0) throw new Error(`no seats left in ${seat}`); // FAILED_PRECONDITION for the caller
    seats.set(ctx, seat, left);
    return { output: { left }, nextSteps: [{ step: ship, input: { seat } }] };
  },
});

const shop = new Flow({ type: "Shop", startStep: open, steps: [open, ship], attributes: [stage, seats], rpcs: [reserve] });

async function main(): Promise<void> {
  const worker = new Worker({ addresses: [address] }).host(shop);
  const running = worker.run();
  await worker.ready();
  const client = new Client({ addresses: [address] });
  try {
    const flowId = `shop-${randomUUID()}`;
    await client.startFlow(shop, flowId, null, { initialAttributes: [seats.write("A1", 1), stage.write("open")] });
    const first = await client.invokeRpc(flowId, reserve, { seat: "A1" }, { timeoutMs: 5_000 });
    const shipped = await client.waitForAttribute(flowId, stage, "shipped A1", { timeoutMs: 10_000 });
    const second = await client.invokeRpc(flowId, reserve, { seat: "A1" }).catch((e: Error) => e.message);
    await client.setAttributes(flowId, [stage.write("closing")]);
    const attrs = await client.getAttributes(flowId);
    console.log(
      JSON.stringify({
        first: first.output,
        shipped: shipped.matched,
        second,
        stage: attrs.get(stage),
        seats: Object.fromEntries(attrs.instances(seats)),
      }),
    );
    await client.stopFlow(flowId);
  } finally {
    client.close();
    await worker.shutdown();
    await running;
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
