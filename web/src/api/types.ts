// The API messages dex-web reads, as the gateway prints them: proto3 JSON (proto/dex/*.proto),
// lowerCamelCase, enums by name, 64-bit integers as decimal strings, bytes as base64. Every field is
// printed (defaults included); oneof members and unset messages are absent.

export type Int64 = string;

export interface BlobRef {
  key: string;
  sizeBytes: Int64;
  sha256: string;
}

export interface Payload {
  data?: string; // base64
  blob?: BlobRef;
}

export type FlowStatus =
  | "FLOW_STATUS_UNSPECIFIED"
  | "FLOW_RUNNING"
  | "FLOW_COMPLETED"
  | "FLOW_FAILED"
  | "FLOW_CANCELED"
  | "FLOW_TERMINATED"
  | "FLOW_TIMED_OUT"
  | "FLOW_CONTINUED_AS_NEW";

export interface FlowRef {
  flowId: string;
  runId: string;
}

export interface StepOutput {
  stepType: string;
  stepExecutionId: string;
  output?: Payload;
}

export interface SubFlowParent {
  flowId: string;
  runId: string;
  stepExecutionId: string;
  conditionIndex: number;
}

export interface FlowDescription {
  flowId: string;
  runId: string;
  flowType: string;
  declarationVersion: number;
  status: FlowStatus;
  startUnixMs: Int64;
  closeUnixMs: Int64;
  closeReason: string;
  outputs: StepOutput[];
  input?: Payload;
  runs: number;
  parents: SubFlowParent[];
  flowAttempt: number;
  previousRunId: string;
  nextRunId: string;
  retryUnixMs: Int64;
  expireUnixMs: Int64;
  traveledFromRunId: string;
  traveledToRunId: string;
  continuedFromRunId: string;
}

export interface AttributeValue {
  stringValue?: string;
  int64Value?: Int64;
  doubleValue?: number | string;
  boolValue?: boolean;
  datetimeUnixMs?: Int64;
  jsonValue?: string;
  bytesValue?: string;
  blob?: BlobRef;
}

export interface Attribute {
  key: string;
  instanceKey: string;
  value?: AttributeValue;
}

export interface AttributeView {
  attribute?: Attribute;
  omittedBytes: Int64;
}

export interface FailureInfo {
  attempt: number;
  outcome: string;
  error: string;
  atMs: Int64;
}

export interface Condition {
  conditionId: string;
  timer?: { durationMs?: Int64; atUnixMs?: Int64 };
  channel?: { channel: string; instanceKey: string; match: string; min: number; max: number };
  subFlow?: { flowType: string };
}

export interface ConditionView {
  condition?: Condition;
  fired: boolean;
  skipped: boolean;
  timerUnixMs: Int64;
  queued: Int64;
  childFlowId: string;
  childRunId: string;
}

export interface StepExecutionView {
  stepExecutionId: string;
  stepType: string;
  phase: string;
  scheduledBy: string;
  method: string;
  attempt: number;
  taskState: string;
  workerId: string;
  retryUnixMs: Int64;
  lastFailure?: FailureInfo;
  conditions: ConditionView[];
  createdUnixMs: Int64;
}

export interface QueuedMessageView {
  seq: Int64;
  message?: Payload;
  omittedBytes: Int64;
}

export interface ChannelQueueView {
  channel: string;
  instanceKey: string;
  count: Int64;
  messages: QueuedMessageView[];
}

export interface GetFlowStateResponse {
  flow?: FlowDescription;
  active: StepExecutionView[];
  workers: string[];
  timeoutHandler?: StepExecutionView;
  queues: ChannelQueueView[];
  queuesOmitted: Int64;
  attributes: AttributeView[];
  ended: StepExecutionView[];
  endedCount: Int64;
  config?: Record<string, unknown>;
}

export interface HistoryEvent {
  seq: Int64;
  kind: string;
  atMs: Int64;
  stepExecutionId: string;
  attempt: number;
  error: string;
  status: FlowStatus;
  reason: string;
  rpcName: string;
  publish?: { channel: string; instanceKey: string; messages: Payload[] };
  [field: string]: unknown;
}

export interface GetHistoryEventsResponse {
  runId: string;
  events: HistoryEvent[];
  more: boolean;
}

export interface SearchField {
  key: string;
  type: string;
  text: string;
  items: string[];
  intValue: Int64;
  doubleValue: number | string;
  boolValue: boolean;
  timeMs: Int64;
}

export interface FlowSearchRow {
  flowId: string;
  runId: string;
  flowType: string;
  status: FlowStatus;
  startUnixMs: Int64;
  closeUnixMs: Int64;
  parentFlowId: string;
  fields: SearchField[];
}

export interface SearchFlowsResponse {
  rows: FlowSearchRow[];
  nextPageToken: string;
  appliedSlot: Int64;
}

export interface AttributeStoreStatus {
  name: string;
  type: string;
  table: string;
  state: string;
  watermarkSlot: Int64;
  lagSlots: Int64;
  lagSeconds: number;
  transactions: Int64;
  failures: Int64;
  rows: Int64;
  filteredFields: Int64;
  lastError: string;
}

export interface DescribeResponse {
  nodeId: string;
  nodeEpoch: string;
  holderProcessId: string;
  attributeStores: AttributeStoreStatus[];
}

// ------------------------------------------------------------ the actions' answers

export interface InvokeRpcResponse {
  runId: string;
  output?: Payload;
}

export interface TimeTravelResponse {
  runId: string;
  alreadyDone: boolean;
  start?: GetFlowStateResponse;
  attributes: Attribute[];
}

export type StopMode = "STOP_CANCEL" | "STOP_TERMINATE" | "STOP_FAIL";

export type RunTimer = "RUN_TIMER_FLOW_TIMEOUT" | "RUN_TIMER_START_DELAY";

export type TimeTravelKind =
  | "TIME_TRAVEL_BEGINNING"
  | "TIME_TRAVEL_EVENT_TIME"
  | "TIME_TRAVEL_FIRST_OF_STEP_TYPE"
  | "TIME_TRAVEL_LATEST_OF_STEP_TYPE"
  | "TIME_TRAVEL_STEP_EXECUTION";

export interface TimeTravelPoint {
  kind: TimeTravelKind;
  eventTimeMs?: Int64;
  stepType?: string;
  stepExecutionId?: string;
}

// ------------------------------------------------------------ query completion (docs/search.md)

export type IndexType =
  | "INDEX_TYPE_UNSPECIFIED"
  | "INDEX_KEYWORD"
  | "INDEX_FULL_TEXT"
  | "INDEX_KEYWORD_ARRAY"
  | "INDEX_INT"
  | "INDEX_DOUBLE"
  | "INDEX_BOOL"
  | "INDEX_DATETIME";

export interface SearchKeyInfo {
  name: string;
  type: IndexType;
  system: boolean;
  sortable: boolean;
  flowTypes: string[];
}

export interface ListSearchKeysResponse {
  keys: SearchKeyInfo[];
  truncated: boolean;
  appliedSlot: Int64;
}

export interface ListSearchValuesResponse {
  values: string[];
  truncated: boolean;
  appliedSlot: Int64;
}
