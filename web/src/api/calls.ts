// The calls dex-web makes, typed: one function per API method it uses.
import { call } from "./client";
import type {
  Attribute,
  DescribeResponse,
  FlowDescription,
  FlowRef,
  GetFlowStateResponse,
  GetHistoryEventsResponse,
  InvokeRpcResponse,
  ListSearchKeysResponse,
  ListSearchValuesResponse,
  Payload,
  RunTimer,
  SearchFlowsResponse,
  StopMode,
  TimeTravelPoint,
  TimeTravelResponse,
} from "./types";

export const searchFlows = (
  req: { query: string; pageSize?: number; pageToken?: string; fields?: string[] },
  signal?: AbortSignal,
) => call<SearchFlowsResponse>("dex.FlowService", "SearchFlows", req, signal);

/** What a query can name: the system fields, then the index keys in use (docs/search.md). */
export const listSearchKeys = (signal?: AbortSignal) =>
  call<ListSearchKeysResponse>("dex.FlowService", "ListSearchKeys", {}, signal);

/** Distinct values of a KEYWORD or KEYWORD_ARRAY field starting with `prefix` (at most `limit`). */
export const listSearchValues = (
  req: { key: string; prefix: string; limit?: number },
  signal?: AbortSignal,
) => call<ListSearchValuesResponse>("dex.FlowService", "ListSearchValues", req, signal);

export const describeFlow = (flow: FlowRef, signal?: AbortSignal) =>
  call<FlowDescription>("dex.FlowService", "DescribeFlow", flow, signal);

export const getFlowState = (flow: FlowRef, signal?: AbortSignal) =>
  call<GetFlowStateResponse>("dex.FlowService", "GetFlowState", flow, signal);

export const getHistoryEvents = (
  req: { flow: FlowRef; afterSeq: string; fromStart: boolean; pageSize?: number },
  signal?: AbortSignal,
) => call<GetHistoryEventsResponse>("dex.FlowService", "GetHistoryEvents", req, signal);

/** A long poll: answers once an event after `afterSeq` exists, or empty after `timeoutMs`. */
export const waitForHistoryEvent = (
  req: { flow: FlowRef; afterSeq: string; fromStart: boolean; timeoutMs: string },
  signal?: AbortSignal,
) => call<GetHistoryEventsResponse>("dex.FlowService", "WaitForHistoryEvent", req, signal);

export const adminDescribe = (signal?: AbortSignal) =>
  call<DescribeResponse>("dex.AdminService", "Describe", {}, signal);

// The writes of the Run view's actions. Each carries the caller's request ID, so that a repeat of
// the same call (a retry after a lost answer) changes nothing (docs/api.md, "Repeated calls").

export const stopFlow = (req: { flowId: string; runId: string; mode: StopMode; reason: string; requestId: string }) =>
  call<object>("dex.FlowService", "StopFlow", req);

export const publishToChannel = (req: {
  flowId: string;
  runId: string;
  channel: string;
  instanceKey: string;
  messages: Payload[];
  requestId: string;
}) => call<object>("dex.FlowService", "PublishToChannel", req);

/** A waiting execution's Timer condition (stepExecutionId, conditionIndex), or the run's own Timer. */
export const skipTimer = (
  req: { flow: FlowRef; requestId: string } & (
    | { stepExecutionId: string; conditionIndex: number }
    | { runTimer: RunTimer }
  ),
) => call<object>("dex.FlowService", "SkipTimer", req);

export const setAttributes = (req: { flow: FlowRef; writes: Attribute[]; requestId: string }) =>
  call<{ runId: string }>("dex.FlowService", "SetAttributes", req);

export const invokeRpc = (req: {
  flow: FlowRef;
  name: string;
  input: Payload;
  lockKeys: string[];
  requestId: string;
}) => call<InvokeRpcResponse>("dex.FlowService", "InvokeRpc", req);

export const timeTravel = (req: {
  flow: FlowRef;
  point: TimeTravelPoint;
  reason: string;
  requestId: string;
  dryRun: boolean;
}) => call<TimeTravelResponse>("dex.FlowService", "TimeTravel", req);
