// The calls dex-web makes, typed: one function per API method it uses.
import { call } from "./client";
import type {
  DescribeResponse,
  FlowDescription,
  FlowRef,
  GetFlowStateResponse,
  GetHistoryEventsResponse,
  SearchFlowsResponse,
} from "./types";

export const searchFlows = (
  req: { query: string; pageSize?: number; pageToken?: string; fields?: string[] },
  signal?: AbortSignal,
) => call<SearchFlowsResponse>("dex.FlowService", "SearchFlows", req, signal);

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
