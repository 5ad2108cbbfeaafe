// Internal: loads dex/api.proto (the package's copy of the repository's
// proto/dex, the single source of the API; it imports the dex Flow messages)
// at run time with @grpc/proto-loader, and the shapes of its messages as
// proto-loader hands them over (camelCase fields, enums as names, int64 as
// numbers, `kind` naming the field set in a oneof).
import * as fs from "node:fs";
import * as path from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

// ----------------------------------------------------------------- messages
// Requests are written with only the fields they need; responses arrive with
// every field (defaults: true), a oneof's set member named by its `kind`-like
// virtual field, bytes as Buffers.

export interface WireDescribeResponse {
  nodeId: string;
  nodeEpoch: string;
  holderProcessId: string;
}

// The Worker stream (dex.WorkerTaskService/PollWorkerTask in api.proto).

export type WireWorkerMessage =
  | { hello: { workerId: string; maxConcurrentTasks: number; flows: WireFlowDeclaration[] } }
  | { heartbeat: { taskId: string; details: string } }
  | { flowResult: WireFlowTaskResult };

export interface WireServerMessage {
  kind?: "helloAck" | "ping" | "resultAck" | "heartbeatAck" | "flowTask";
  helloAck?: { nodeId: string; nodeEpoch: string };
  flowTask?: WireFlowTask;
  ping?: Record<string, never>;
  resultAck?: { taskId: string; accepted: boolean; reason: string };
  heartbeatAck?: { taskId: string; cancelRequested: boolean };
}

// The dex Flow messages (package dex.flow: flow.proto, flow_api.proto, flow_records.proto).

export interface WirePayload {
  data: Uint8Array;
}

export interface WireRetryPolicy {
  initialIntervalMs?: number;
  backoffCoefficient?: number;
  maximumIntervalMs?: number;
  maximumAttempts?: number;
  totalDurationMs?: number;
}

export interface WireMethodOptions {
  attemptTimeoutMs?: number;
  retry?: WireRetryPolicy;
  failurePolicy?: string;
  recoveryStepType?: string;
  durability?: string;
  heartbeatTimeoutMs?: number;
  lockKeys?: string[];
}

export interface WireStepOptions {
  waitFor?: WireMethodOptions | null;
  execute?: WireMethodOptions | null;
}

export interface WireFlowDeclaration {
  flowType: string;
  startStepType: string;
  steps: { stepType: string; hasWaitFor: boolean; options: WireStepOptions; attributeReads: string[] }[];
  channels: { name: string; isMap: boolean }[];
  attributes: WireAttributeDeclaration[];
  rpcs: WireRpcDeclaration[];
  /** The Flow has a timeout handler: tasks of method ON_TIMEOUT (TimeoutPolicy TIMEOUT_HANDLER). */
  hasTimeoutHandler?: boolean;
  /** The timeout handler's options and reads (unset: the defaults, no reads). */
  onTimeout?: { options: WireMethodOptions; attributeReads: string[] };
  /** The Attribute Store its runs sync to unless a start names another ("": none). */
  attributeStore?: string;
  /** The Flow's FlowConfig for its runs (a start's overrides it field by field). */
  config?: WireFlowConfig | null;
}

/** FlowConfig (flow.proto; docs/flow-rules.md, "FlowConfig"): unset fields are not set. */
export interface WireFlowConfig {
  continueAsNewAfterEvents?: number;
  continueAsNewAfterBytes?: number;
  /** Durability by name ("SYNC", "ASYNC"). */
  defaultDurability?: string;
  attributeStore?: string;
  indexActiveStepTypes?: boolean;
}

/** AttributeType by name. */
export type WireAttributeType =
  | "ATTRIBUTE_TYPE_UNSPECIFIED"
  | "ATTRIBUTE_STRING"
  | "ATTRIBUTE_INT64"
  | "ATTRIBUTE_DOUBLE"
  | "ATTRIBUTE_BOOL"
  | "ATTRIBUTE_DATETIME"
  | "ATTRIBUTE_JSON"
  | "ATTRIBUTE_BYTES";

/** IndexType by name: how SearchFlows indexes an Attribute. */
export type WireIndexType =
  | "INDEX_TYPE_UNSPECIFIED"
  | "INDEX_KEYWORD"
  | "INDEX_FULL_TEXT"
  | "INDEX_KEYWORD_ARRAY"
  | "INDEX_INT"
  | "INDEX_DOUBLE"
  | "INDEX_BOOL"
  | "INDEX_DATETIME";

export interface WireAttributeIndex {
  type: WireIndexType;
  /** "": the Attribute's key. */
  indexKey: string;
}

export interface WireAttributeDeclaration {
  key: string;
  type: WireAttributeType;
  isMap: boolean;
  /** Set only for an indexed Attribute. */
  index?: WireAttributeIndex;
  /** Its writes sync to the run's Attribute Store (plain Attributes only); set only when true. */
  sync?: boolean;
}

export interface WireRpcDeclaration {
  name: string;
  lockKeys: string[];
  attributeReads: string[];
}

/** One member of the oneof is set; `value` names it in what the server sends. */
export interface WireAttributeValue {
  stringValue?: string;
  int64Value?: number;
  doubleValue?: number;
  boolValue?: boolean;
  datetimeUnixMs?: number;
  jsonValue?: string;
  bytesValue?: Uint8Array;
  value?: "stringValue" | "int64Value" | "doubleValue" | "boolValue" | "datetimeUnixMs" | "jsonValue" | "bytesValue";
}

/** An Attribute or AttributeMap instance; in a write, no value deletes it. */
export interface WireAttribute {
  key: string;
  instanceKey: string;
  value?: WireAttributeValue | null;
}

export interface WireTimerCondition {
  durationMs?: number;
  atUnixMs?: number;
  when?: "durationMs" | "atUnixMs";
}

export interface WireChannelCondition {
  channel: string;
  instanceKey: string;
  match: string;
  min: number;
  max: number;
}

/** StartOptions (flow.proto): what a start or a SubFlow condition sets; the server fills the rest. */
export interface WireStartOptions {
  timeoutMs?: number;
  timeoutPolicy?: string;
  idReusePolicy?: string;
  requestId?: string;
  ignoreAlreadyStarted?: boolean;
  startDelayMs?: number;
  initialAttributes?: WireAttribute[];
  retryPolicy?: WireRetryPolicy | null;
  /** The Attribute Store the run's synced Attributes go to ("": the declaration's). */
  attributeStore?: string;
  /** Overrides the declaration's FlowConfig field by field. */
  config?: WireFlowConfig | null;
}

export interface WireSubFlowCondition {
  flowType: string;
  input: WirePayload | null;
  options?: WireStartOptions | null;
  reusePolicy?: string;
}

export interface WireCondition {
  conditionId: string;
  timer?: WireTimerCondition | null;
  channel?: WireChannelCondition | null;
  subFlow?: WireSubFlowCondition | null;
  kind?: "timer" | "channel" | "subFlow";
}

export interface WireWait {
  kind: string;
  conditions: WireCondition[];
  combinations: { conditionIds: string[] }[];
}

export interface WireConditionResult {
  index: number;
  conditionId: string;
  fired: boolean;
  skipped: boolean;
  messages: WirePayload[];
  condition: WireCondition | null;
  /** A SubFlow condition: its child when the wait was met (RUNNING: it lost an AnyOf). */
  subFlow?: WireSubFlowResult | null;
}

export interface WireSubFlowResult {
  flowId: string;
  runId: string;
  status: string;
  outputs: WireStepOutput[];
  closeReason: string;
}

export interface WireStepMovement {
  stepType: string;
  input?: WirePayload | null;
  options?: WireStepOptions | null;
}

export interface WireChannelRef {
  channel: string;
  instanceKey: string;
  allInstances: boolean;
}

export interface WireStepDecision {
  goTo?: { movements: WireStepMovement[] } | null;
  gracefulComplete?: WirePayload | null;
  forceComplete?: WirePayload | null;
  forceFail?: string;
  deadEnd?: Record<string, never> | null;
  forceCompleteIfChannelsEmpty?: {
    channels: WireChannelRef[];
    output?: WirePayload | null;
    otherwise: WireStepMovement[];
  } | null;
  cancelStepTypes: string[];
  cancelSiblings: boolean;
  /** With goTo or deadEnd: the run then continues as a new run of its Flow ID. */
  continueAsNew?: boolean;
  kind?: string;
}

export interface WirePublish {
  channel: string;
  instanceKey: string;
  messages: WirePayload[];
}

export interface WireFlowTask {
  taskId: string;
  flowId: string;
  runId: string;
  flowType: string;
  declarationVersion: number;
  stepType: string;
  stepExecutionId: string;
  method: string;
  attempt: number;
  firstAttemptUnixMs: number;
  scheduledBy: string;
  input: WirePayload | null;
  locals: WirePayload | null;
  conditions: WireConditionResult[];
  waitForFailed: boolean;
  recoveryError: string;
  attemptTimeoutMs: number;
  heartbeatTimeoutMs: number;
  /** Method RPC: the RPC's name (stepExecutionId is its ID). */
  rpcName: string;
  /** The current values of the Attributes the Step or RPC reads (absent: no value). */
  attributes: WireAttribute[];
  /** The run's Flow retry attempt (1: its first run); 0 from a server that does not say. */
  flowAttempt?: number;
  /** Every non-empty Channel queue of the run and its size, as the task was handed out. */
  channelSizes?: { channel: string; instanceKey: string; size: number }[];
  /** The run had more than 10,000 non-empty queues: channelSizes stops there. */
  channelSizesTruncated?: boolean;
}

export interface WireFlowTaskResult {
  taskId: string;
  wait?: WireWait;
  decision?: WireStepDecision;
  error?: { message: string; nonRetryable: boolean; retryAfterMs?: number };
  rpc?: { output: WirePayload; nextSteps: WireStepMovement[] };
  locals?: WirePayload;
  publishes?: WirePublish[];
  attributeWrites?: WireAttribute[];
}

export interface WireStepOutput {
  stepType: string;
  stepExecutionId: string;
  output: WirePayload | null;
}

export interface WireFlowDescription {
  flowId: string;
  runId: string;
  flowType: string;
  declarationVersion: number;
  status: string;
  startUnixMs: number;
  closeUnixMs: number;
  closeReason: string;
  outputs: WireStepOutput[];
  input: WirePayload | null;
  runs: number;
  /** A SubFlow child: the parents' waits it meets when it closes. */
  parents?: WireSubFlowParent[];
  /** Flow retry: this run's attempt, the runs before and after it, when a pending retry starts (0: none pending). */
  flowAttempt?: number;
  previousRunId?: string;
  nextRunId?: string;
  retryUnixMs?: number;
  /** Retention: when this run, closed for good, is deleted (0: not scheduled). */
  expireUnixMs?: number;
  /** Time travel: the run this one was started from, and the latest run started from this one. */
  traveledFromRunId?: string;
  traveledToRunId?: string;
  /** Continue-as-new: the run this one continues. */
  continuedFromRunId?: string;
}

export interface WireSubFlowParent {
  flowId: string;
  runId: string;
  stepExecutionId: string;
  conditionIndex: number;
}

export interface WireFailureInfo {
  attempt: number;
  outcome: string;
  error: string;
  atMs: number;
}

export interface WireStepExecutionView {
  stepExecutionId: string;
  stepType: string;
  phase: string;
  scheduledBy: string;
  method: string;
  attempt: number;
  taskState: string;
  workerId: string;
  retryUnixMs: number;
  lastFailure: WireFailureInfo | null;
  conditions: {
    condition: WireCondition | null;
    fired: boolean;
    skipped: boolean;
    timerUnixMs: number;
    queued: number;
    childFlowId?: string;
    childRunId?: string;
  }[];
  createdUnixMs: number;
}

export interface WireGetFlowStateResponse {
  flow: WireFlowDescription | null;
  active: WireStepExecutionView[];
  workers: string[];
  /** The timeout handler while it runs. */
  timeoutHandler?: WireStepExecutionView | null;
  /** The Channel queues holding messages (the first 1,000), each with its oldest messages (up to 5). */
  queues?: WireChannelQueueView[];
  queuesOmitted?: number;
  /** Every Attribute and AttributeMap instance; omittedBytes > 0: the value was left out (size budget). */
  attributes?: { attribute: WireAttribute | null; omittedBytes: number }[];
  /** Ended executions (DONE, FAILED, CANCELED): the 100 created last, newest first; endedCount: all of them. */
  ended?: WireStepExecutionView[];
  endedCount?: number;
  /** The run's effective FlowConfig, every field filled in. */
  config?: WireFlowConfig | null;
}

export interface WireChannelQueueView {
  channel: string;
  instanceKey: string;
  count: number;
  /** omittedBytes > 0: the message was left out (size budget). */
  messages: { seq: number; message: WirePayload | null; omittedBytes: number }[];
}

export interface WireHistoryEvent {
  seq: number;
  kind: string;
  atMs: number;
  stepExecutionId: string;
  attempt: number;
  error: string;
  wait: WireWait | null;
  decision: WireStepDecision | null;
  conditions: WireConditionResult[];
  publish: WirePublish | null;
  status: string;
  reason: string;
  attributeWrites?: WireAttribute[];
  rpcName?: string;
  output?: WirePayload | null;
  method?: string;
  lockKeys?: string[];
  /** SUB_FLOW_STARTED, SUB_FLOW_CLOSED: the child and the condition; attached: the run existed. */
  childFlowId?: string;
  childRunId?: string;
  conditionIndex?: number;
  attached?: boolean;
  /** FLOW_STARTED of a Flow retry: the run before; FLOW_CLOSED with a retry to follow: the next run and when. */
  previousRunId?: string;
  nextRunId?: string;
  retryAtMs?: number;
  /** FLOW_STARTED of a time-traveled run: the run it came from and the point. */
  traveledFromRunId?: string;
  timeTravelPoint?: WireTimeTravelPoint | null;
  /** FLOW_STARTED of a run continued as new: the run it continues. */
  continuedFromRunId?: string;
  /** FLOW_CONFIG_UPDATED: the run's effective FlowConfig before and after. */
  oldConfig?: WireFlowConfig | null;
  newConfig?: WireFlowConfig | null;
}

/** TimeTravelKind by name. */
export type WireTimeTravelKind =
  | "TIME_TRAVEL_KIND_UNSPECIFIED"
  | "TIME_TRAVEL_BEGINNING"
  | "TIME_TRAVEL_EVENT_TIME"
  | "TIME_TRAVEL_FIRST_OF_STEP_TYPE"
  | "TIME_TRAVEL_LATEST_OF_STEP_TYPE"
  | "TIME_TRAVEL_STEP_EXECUTION";

/** TimeTravelPoint (flow_records.proto): the member its kind uses is set. */
export interface WireTimeTravelPoint {
  kind: WireTimeTravelKind;
  eventTimeMs?: number;
  stepType?: string;
  stepExecutionId?: string;
}

/** FlowService.TimeTravel (flow_api.proto): a new run from a point of the latest run's history. */
export interface WireTimeTravelRequest {
  flow: { flowId: string; runId: string };
  point: WireTimeTravelPoint;
  reason: string;
  requestId: string;
  dryRun: boolean;
}

/** FlowService.UpdateFlowConfig (flow_api.proto). */
export interface WireUpdateFlowConfigRequest {
  flow: { flowId: string; runId: string };
  config: WireFlowConfig;
  /** FlowConfig field names as the proto spells them (continue_as_new_after_events, ...). */
  clearFields: string[];
  requestId: string;
}

export interface WireUpdateFlowConfigResponse {
  /** The run's effective config now, every field filled in. */
  config: WireFlowConfig | null;
  alreadyDone: boolean;
  /** The run continued as new at once ("": it did not). */
  continuedRunId: string;
}

/** FlowService.TriggerContinueAsNew (flow_api.proto). */
export interface WireTriggerContinueAsNewRequest {
  flow: { flowId: string; runId: string };
  reason: string;
  requestId: string;
}

export interface WireTriggerContinueAsNewResponse {
  /** The new run, when the run continued at once ("": pending). */
  newRunId: string;
  alreadyDone: boolean;
}

export interface WireTimeTravelResponse {
  runId: string;
  alreadyDone: boolean;
  /** A dry run: the new run as it would start (null otherwise). */
  start: WireGetFlowStateResponse | null;
  attributes: WireAttribute[];
}

/** SearchFlows (flow_api.proto; docs/search.md). */
export interface WireSearchFlowsRequest {
  query: string;
  pageSize: number;
  pageToken: string;
  fields: string[];
}

/** One value of a searchable field (flow_records.proto's SearchField): the member its type uses is set. */
export interface WireSearchField {
  key: string;
  type: WireIndexType;
  text: string;
  items: string[];
  intValue: number;
  doubleValue: number;
  boolValue: boolean;
  timeMs: number;
}

export interface WireFlowSearchRow {
  flowId: string;
  runId: string;
  flowType: string;
  status: string;
  startUnixMs: number;
  closeUnixMs: number;
  parentFlowId: string;
  fields: WireSearchField[];
}

export interface WireSearchFlowsResponse {
  rows: WireFlowSearchRow[];
  nextPageToken: string;
  appliedSlot: number;
}

/** ListSearchKeys' answer (flow_api.proto): the fields a query can name. */
export interface WireSearchKeyInfo {
  name: string;
  type: WireIndexType;
  system: boolean;
  sortable: boolean;
  flowTypes: string[];
}

export interface WireListSearchKeysResponse {
  keys: WireSearchKeyInfo[];
  truncated: boolean;
  appliedSlot: number;
}

/** ListSearchValues' answer: distinct values of a KEYWORD field by prefix. */
export interface WireListSearchValuesResponse {
  values: string[];
  truncated: boolean;
  appliedSlot: number;
}

export interface WireGetHistoryEventsResponse {
  runId: string;
  events: WireHistoryEvent[];
  more: boolean;
}

// ------------------------------------------------------------------ loading

/**
 * Where proto/dex/api.proto is: $DEX_PROTO_DIR (the folder that holds dex/),
 * the package's own copy (proto/ beside dist/, which the build refreshes
 * from the repository's proto/ and `npm pack` ships), or a proto/ found by
 * walking up from here (the repository's, when run from its source).
 */
function protoRoot(): string {
  const candidates: string[] = [];
  const fromEnv = process.env["DEX_PROTO_DIR"];
  if (fromEnv !== undefined && fromEnv !== "") candidates.push(fromEnv);
  candidates.push(path.join(__dirname, "..", "proto"));
  let dir = __dirname;
  for (let i = 0; i < 8; i++) {
    candidates.push(path.join(dir, "proto"));
    const parent = path.dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
  for (const candidate of candidates) {
    if (fs.existsSync(path.join(candidate, "dex", "api.proto"))) return candidate;
  }
  throw new Error(
    `dex-sdk: cannot find dex/api.proto (looked in ${candidates.join(", ")}); ` +
      "set DEX_PROTO_DIR to the folder that holds dex/api.proto",
  );
}

/**
 * The full name of the dex Flow API's gRPC service, written here only (its
 * messages are in package dex.flow; it was dex.flow.FlowService while the DAG
 * model's service had this name).
 */
export const FLOW_SERVICE = "dex.FlowService";

export interface DexServices {
  /** The dex Flow API: FLOW_SERVICE. */
  FlowService: grpc.ServiceClientConstructor;
  WorkerTaskService: grpc.ServiceClientConstructor;
  AdminService: grpc.ServiceClientConstructor;
}

let loaded: DexServices | undefined;

/** The constructor of the service `fullName` ("package.Service") of a loaded package definition. */
function serviceAt(pkg: grpc.GrpcObject, fullName: string): grpc.ServiceClientConstructor {
  let at: unknown = pkg;
  for (const part of fullName.split(".")) at = (at as Record<string, unknown> | undefined)?.[part];
  if (typeof at !== "function") throw new Error(`dex-sdk: the loaded API has no service ${fullName}`);
  return at as grpc.ServiceClientConstructor;
}

/** The service constructors, loaded once. */
export function services(): DexServices {
  if (loaded !== undefined) return loaded;
  const root = protoRoot();
  const definition = protoLoader.loadSync("dex/api.proto", {
    includeDirs: [root],
    keepCase: false,
    longs: Number,
    enums: String,
    defaults: true,
    arrays: true,
    oneofs: true,
  });
  const pkg = grpc.loadPackageDefinition(definition);
  loaded = {
    FlowService: serviceAt(pkg, FLOW_SERVICE),
    WorkerTaskService: serviceAt(pkg, "dex.WorkerTaskService"),
    AdminService: serviceAt(pkg, "dex.AdminService"),
  };
  return loaded;
}

/**
 * Channel settings of every dex connection: its own connection state (no
 * subchannel shared with other clients), reconnect backoff bounded by the
 * arguments so a restarted server is found as soon as the caller retries, and
 * room for large values (each may be as long as the server's values.maxSize,
 * 64 MiB unless configured, at most 512 MiB; a task or answer may hold several).
 */
export function channelOptions(reconnectInitialMs: number, reconnectMaxMs: number): grpc.ChannelOptions {
  const initial = Math.max(10, Math.round(reconnectInitialMs));
  const max = Math.max(initial, Math.round(reconnectMaxMs));
  return {
    "grpc.use_local_subchannel_pool": 1,
    "grpc.initial_reconnect_backoff_ms": initial,
    "grpc.max_reconnect_backoff_ms": max,
    // A connection whose peer stopped answering (a frozen process, a
    // partition) fails its open calls within about 13 s; not more often: the
    // server hangs up with too_many_pings on pings closer than 5 s apart
    // without data. The Worker's stream silence limit acts sooner.
    "grpc.keepalive_time_ms": 10_000,
    "grpc.keepalive_timeout_ms": 3_000,
    // Any size: the server bounds what it sends and judges what it receives.
    "grpc.max_receive_message_length": -1,
    "grpc.max_send_message_length": -1,
  };
}
