// dex-sdk: the TypeScript client and Worker of the dex durable-execution server.
export {
  Client,
  WaitTimeoutError,
  type CallOptions,
  type ClientOptions,
  type ListFlowsRequest,
  type ListFlowsResult,
  type NodeDescription,
  type RegisterFlowTypeResult,
  type StartFlowRequest,
  type StartFlowResult,
  type WaitFlowOptions,
} from "./client";
export {
  Worker,
  TaskCancelledError,
  defaultWorkerId,
  type Handler,
  type Logger,
  type StepInput,
  type Task,
  type WorkerOptions,
  type WorkerStats,
} from "./worker";
export { DexError, StepFailure, grpcCodeName, type DexErrorCode, type StepFailureOptions } from "./errors";
export { parseServerAddresses, validateServerAddress, validateServerAddresses } from "./addresses";
export type {
  Attempt,
  AttemptOutcome,
  DispatchMode,
  Flow,
  FlowStatus,
  FlowType,
  JsonValue,
  RetryPolicy,
  Step,
  StepDef,
  StepStatus,
} from "./types";
