// An RPC call's own lock keys (invokeRpc's lockKeys) against a real
// dex-server-zd dev: two calls with the same key never run at once, calls
// with different keys do, a call key equal to one the RPC declares waits for
// it, and a bad key list is refused INVALID_ARGUMENT without running anything.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { Client, DexError, Flow, Rpc, Timer, Wait, deadEnd, type Step } from "../src/index";
import { startLiveStack, type LiveStack } from "./live-stack";

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

// How many handlers ran at once, at most, and how many ran.
let running = 0;
let most = 0;
let calls = 0;
const reset = (): void => {
  running = most = calls = 0;
};

// Holds for holdMs, or until `meet` handlers have run at once (at most 10 s).
async function hold(input: { holdMs?: number; meet?: number }): Promise<void> {
  calls++;
  most = Math.max(most, ++running);
  try {
    if (input.meet !== undefined) {
      for (let waited = 0; most < input.meet && waited < 10_000; waited += 20) await sleep(20);
    } else {
      await sleep(input.holdMs ?? 0);
    }
  } finally {
    running--;
  }
}

// Keeps a run open: the RPCs do the work.
const idle: Step = { type: "Idle", waitFor: () => Wait.anyOf(Timer.after(600_000)), execute: () => deadEnd() };
const touch = new Rpc<{ holdMs?: number; meet?: number }, null>({
  name: "touch",
  handler: async (_ctx, input) => {
    await hold(input);
    return { output: null };
  },
});
const audit = new Rpc<{ holdMs?: number; meet?: number }, null>({
  name: "audit",
  lockKeys: ["ledger"],
  handler: async (_ctx, input) => {
    await hold(input);
    return { output: null };
  },
});
const ACCOUNTS = new Flow({ type: "ts-call-locks", startStep: idle, steps: [idle], rpcs: [touch, audit] });

describe("an RPC call's own lock keys on a dex server", () => {
  let stack: LiveStack;
  let client: Client;

  before(async () => {
    stack = await startLiveStack(ACCOUNTS);
    client = stack.client;
    await client.startFlow(ACCOUNTS, "calls-1", null);
  });

  after(async () => {
    await stack?.stop();
  });

  test("two calls with the same key do not overlap", async () => {
    reset();
    await Promise.all([
      client.invokeRpc("calls-1", touch, { holdMs: 400 }, { lockKeys: ["acct-1"] }),
      client.invokeRpc("calls-1", touch, { holdMs: 400 }, { lockKeys: ["acct-1"] }),
      client.invokeRpc("calls-1", touch, { holdMs: 400 }, { lockKeys: ["acct-2", "acct-1"] }),
    ]);
    assert.equal(calls, 3);
    assert.equal(most, 1, "two handlers with one call key ran at once");
  });

  test("calls with different keys run together", async () => {
    reset();
    // Each handler waits until the other runs too: they meet only if both run at once.
    await Promise.all([
      client.invokeRpc("calls-1", touch, { meet: 2 }, { lockKeys: ["acct-1"] }),
      client.invokeRpc("calls-1", touch, { meet: 2 }, { lockKeys: ["acct-2"] }),
    ]);
    assert.equal(most, 2, "calls with different keys did not run at once");
  });

  test("a call key equal to a key the RPC declares waits for that RPC", async () => {
    reset();
    await Promise.all([
      client.invokeRpc("calls-1", audit, { holdMs: 400 }),
      client.invokeRpc("calls-1", touch, { holdMs: 400 }, { lockKeys: ["ledger"] }),
    ]);
    assert.equal(most, 1);
  });

  test("a bad key list is refused INVALID_ARGUMENT and runs nothing", async () => {
    reset();
    const refused = async (call: Promise<unknown>, pattern: RegExp): Promise<void> => {
      await assert.rejects(call, (e: unknown) => {
        assert.ok(e instanceof DexError, String(e));
        assert.equal(e.code, "INVALID_ARGUMENT", e.message);
        assert.match(e.message, pattern);
        return true;
      });
    };
    const sixteen = Array.from({ length: 16 }, (_, i) => `k${i}`);
    await refused(client.invokeRpc("calls-1", touch, {}, { lockKeys: ["acct-1", ""] }), /lockKeys\[1\]/);
    await refused(client.invokeRpc("calls-1", touch, {}, { lockKeys: [...sixteen, "k16"] }), /lockKeys has 17 keys/);
    // The server counts the declared key too: 17 in all.
    await refused(client.invokeRpc("calls-1", audit, {}, { lockKeys: sixteen }), /'k15' is one key too many/);
    assert.equal(calls, 0, "a handler ran");
    // The declared key among the call's counts once: 16 in all.
    await client.invokeRpc("calls-1", audit, {}, { lockKeys: [...sixteen.slice(0, 15), "ledger"] });
    assert.equal(calls, 1);
  });
});
