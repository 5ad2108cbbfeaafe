// The dex programming model in TypeScript (docs/flow-rules.md; the C++ twin is
// src/sdk/flow.h): a Flow lists its Steps and its persistence schema (Channels
// and ChannelMaps); a Step has an optional waitFor, which returns a Wait over
// Timers, Channel conditions and SubFlows, and an execute, which returns a
// StepDecision; a Flow may have a timeout handler.
// A Worker hosts Flows (worker.ts: Worker.host); a Client starts and talks to
// their runs (client.ts).
//
//   const approval = new Channel<{ seller: string }>("seller-approval");
//   class Ship implements Step<Order> {
//     readonly type = "Ship";
//     waitFor() { return Wait.anyOf(approval.forOne(), Timer.after(86_400_000)); }
//     execute(ctx: StepContext<Order>) {
//       if (ctx.timerFired()) return goTo(this, ctx.input);
//       return gracefulComplete({ approvedBy: ctx.messages(approval)[0] });
//     }
//   }
//   const orders = new Flow({ type: "OrderProcessing", startStep: "Charge",
//                             steps: [new Charge(), new Ship()], channels: [approval] });
//
// One job per file: checks.ts (limits, names), task-error.ts, codec.ts
// (values as Payloads), waits.ts (conditions, Timers, Waits), channels.ts,
// attributes.ts (Attribute, AttributeMap), options.ts (StepOptions, lock
// keys), start-options.ts (a run's start options: timeout, Flow retry, ...),
// subflows.ts (SubFlow conditions and results), decisions.ts, context.ts
// (StepContext), rpc.ts (Rpc, RpcContext), timeout-handler.ts
// (TimeoutContext), model.ts (Step, Flow), runner.ts (a FlowTask run with its
// Flow).
export { checkName, FLOW_LIMITS, type StepRef } from "./checks";
export { TaskError, type TaskErrorOptions } from "./task-error";
export { fromPayload, jsonCodec, toPayload, type Codec, type JsonValue } from "./codec";
export { Condition, Timer, Wait } from "./waits";
export { Channel, ChannelMap, type ChannelOptions } from "./channels";
export {
  Attribute,
  AttributeMap,
  INDEX_TYPES_BY_ATTRIBUTE_TYPE,
  SEARCH_SYSTEM_FIELDS,
  type AttributeIndex,
  type AttributeMapOptions,
  type AttributeOptions,
  type IndexOptions,
  type SyncOptions,
  type UnindexedAttributeOptions,
  type IndexTypeName,
  type AttributeRef,
  type AttributeScope,
  type AttributeTypeName,
  type AttributeValue,
  type AttributeValueTypes,
  type AttributeWrite,
  type JsonObject,
} from "./attributes";
export {
  mergeStepOptions,
  stepOptionsToWire,
  type ExecuteOptions,
  type MethodOptions,
  type RetryOptions,
  type StepOptions,
  type WaitForOptions,
} from "./options";
export {
  deadEnd,
  decisionToWire,
  forceComplete,
  forceCompleteIfChannelsEmpty,
  forceFail,
  goTo,
  goToMulti,
  gracefulComplete,
  StepDecision,
  type StepMovement,
} from "./decisions";
export { type FlowConfig, type RunStartOptions, type TimeoutPolicy } from "./start-options";
export {
  SubFlow,
  subFlowId,
  type SubFlowConditionOptions,
  type SubFlowDefinition,
  type SubFlowOutput,
  type SubFlowResult,
  type SubFlowReusePolicy,
  type SubFlowStartOptions,
} from "./subflows";
export { StepContext, TaskContext, type ConditionResult } from "./context";
export { TimeoutContext, type TimeoutHandler } from "./timeout-handler";
export { Rpc, RpcContext, type RpcDefinition, type RpcResult } from "./rpc";
export { Flow, type FlowDefinition, type Step, type TimeoutHandlerOptions } from "./model";
export { runFlowTask } from "./runner";
