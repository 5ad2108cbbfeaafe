// The Client of the dex Flow API (and AdminService.Describe): promises, an
// optional AbortSignal per call, DexErrors whose message starts with the gRPC
// code name. Finds the active process among several addresses the way the C++
// SDK does (src/sdk/client.cc; src/sdk/README.md, "Several addresses").
import { randomBytes } from "node:crypto";
import * as grpc from "@grpc/grpc-js";

import { effectiveAddresses, validateServerAddresses } from "./addresses";
import { TokenSource } from "./credentials";
import { TlsConfig, type TlsOptions, wantsDiagnosis } from "./tls";
import { DexError, errorFromGrpc, formatDuration, isConnectionFailure } from "./errors";
import { abortReason, isServiceError, jitter, sleep, unaryCall, waitForConnection } from "./internal";
import { checkReadiness, READINESS_PROBE_TIMEOUT_MS, type Readiness, searchOrder } from "./readiness";
import {
  channelOptions,
  services,
  type WireDescribeResponse,
  type WireFlowDescription,
  type WireGetFlowStateResponse,
  type WireGetHistoryEventsResponse,
  type WireListSearchKeysResponse,
  type WireListSearchValuesResponse,
  type WireSearchFlowsResponse,
  type WireTimeTravelPoint,
  type WireTimeTravelRequest,
  type WireTimeTravelResponse,
  type WireTriggerContinueAsNewRequest,
  type WireTriggerContinueAsNewResponse,
  type WireUpdateFlowConfigRequest,
  type WireUpdateFlowConfigResponse,
} from "./proto";
import {
  searchRequest,
  searchValuesRequest,
  toSearchKeys,
  toSearchPage,
  toSearchValues,
  type FlowSearchPage,
  type FlowSearchRow,
  type SearchFlowsOptions,
  type SearchKeys,
  type SearchValues,
  type SearchValuesOptions,
} from "./search";
import {
  Attribute,
  AttributeMap,
  Channel,
  ChannelMap,
  checkName,
  Flow,
  FLOW_LIMITS,
  fromPayload,
  jsonCodec,
  Rpc,
  toPayload,
  type AttributeRef,
  type AttributeValue,
  type AttributeWrite,
  type Codec,
} from "./flow/index";
import { attributeKeyOf, attributeValueFromWire, attributeValueToWire } from "./flow/attributes";
import { stepTypeOf, type StepRef } from "./flow/checks";
import {
  attributeWritesToWire,
  flowConfigToWire,
  runStartOptionsToWire,
  type FlowConfig,
  type RunStartOptions,
} from "./flow/start-options";
import type { WireAttribute, WireAttributeValue, WirePayload } from "./proto";
import {
  FlowAttributes,
  toAttributeEntry,
  toRunStatus,
  type RunStatus,
  toFlowDescription,
  toEffectiveFlowConfig,
  toFlowState,
  toHistoryPage,
  type EffectiveFlowConfig,
  type FlowDescription,
  type FlowState,
  type HistoryEvent,
  type HistoryPage,
  type StepPhase,
  type TimeTravelPoint,
} from "./flow-types";

/** With TlsOptions: tls, caFile, certFile, keyFile, serverName (tls.ts; README.md, "TLS"). */
export interface ClientOptions extends TlsOptions {
  /**
   * The addresses (host:port) of the processes of one dex node: the active
   * one and its standbys, in any order. Default: [address].
   */
  addresses?: string[];
  /** One address, used when `addresses` is not given. Default "127.0.0.1:8801". */
  address?: string;
  /**
   * Deadline of each call, the search for the active process included
   * (the waits: each server-side piece of the wait plus this). Default 30000.
   */
  timeoutMs?: number;
  /**
   * How long one attempt waits for a connection to an address before the
   * next address is tried (nothing has been sent then). Default 2000.
   */
  connectTimeoutMs?: number;
  /**
   * Sent as "authorization: Bearer <token>" on every call (docs/api.md,
   * "Access"). Default: tokenFile's first line (read again when the file
   * changes), else $DEX_TOKEN, else the file $DEX_TOKEN_FILE names, else none.
   * A file that cannot be read makes every call reject with INVALID_ARGUMENT
   * naming it.
   */
  token?: string;
  tokenFile?: string;
  /** Sent as "authorization: Bearer <token>" on AdminService calls instead of the token. */
  adminCredential?: string;
}

/** Per-call options. */
export interface CallOptions {
  /** This call's deadline instead of the client's timeoutMs. */
  timeoutMs?: number;
  /** Aborting it cancels the call, which then rejects with the signal's reason. */
  signal?: AbortSignal;
}

export interface NodeDescription {
  nodeId: string;
  /** A decimal string. */
  nodeEpoch: string;
  holderProcessId: string;
}

/**
 * How a new run of a dex Flow starts (Client.startFlow with a Flow or Flow
 * type): the run's options (flowTimeoutMs, timeoutPolicy, startDelayMs,
 * initialAttributes, retryPolicy, attributeStore: RunStartOptions) and the
 * start's own.
 */
export interface FlowStartOptions extends CallOptions, RunStartOptions {
  /**
   * When the Flow ID was used before: "allowIfNoRunning" (default: refused
   * while a run is active), "allowIfPreviousFailed", "disallow",
   * "terminateIfRunning" (terminates the active run and starts anew).
   */
  idReusePolicy?: "allowIfNoRunning" | "allowIfPreviousFailed" | "disallow" | "terminateIfRunning";
  /**
   * Names this start. Default: a random one, sent with ignoreAlreadyStarted,
   * so that a repeat of this call after a failover answers the run it started.
   */
  requestId?: string;
  /**
   * With the same requestId as the existing run, a refused start answers that
   * run (alreadyStarted). Without it a start with a given requestId is not
   * repeated on another address once it may have been sent (a repeat could
   * start a second run), so an UNAVAILABLE ends the call.
   */
  ignoreAlreadyStarted?: boolean;
}

export interface GetAttributesOptions extends RunOptions {
  /** Only these keys (an AttributeMap: all its instances). Default: every Attribute the run has. */
  keys?: AttributeRef[];
}

export interface AttributeWaitOptions extends FlowWaitOptions {
  /** An AttributeMap's instance. */
  instanceKey?: string;
}

export interface AttributeWaitResult<T> {
  /** The Attribute equals the value; false: the wait ended (or the run closed) first. */
  matched: boolean;
  /** Its value when the call answered (undefined: none). */
  current: T | undefined;
  status: RunStatus;
}

export interface InvokeRpcOptions<I = unknown, O = unknown> {
  /**
   * How long the server waits for the handler's result: default 10000, at
   * most 60000. The call's own deadline is this plus the client's timeoutMs.
   */
  timeoutMs?: number;
  /**
   * Names the invocation: a retry with the same ID of an RPC whose result
   * was committed answers that result without running the handler again.
   * Default: a random one per call, kept across its retries on other processes.
   */
  requestId?: string;
  /** Default: the latest run. */
  runId?: string;
  /**
   * This call's own lock keys, held besides the RPC's declared ones (at most
   * 16 in all) from queueing until the RPC ends: e.g. the account it touches,
   * so calls on one account run one at a time while calls on others do not wait.
   */
  lockKeys?: string[];
  /** Instead of the Rpc's codecs (JSON for a name). */
  codecs?: { input?: Codec<I>; output?: Codec<O> };
  signal?: AbortSignal;
}

export interface RpcCallResult<O> {
  runId: string;
  output: O;
}

/**
 * InvokeRpc's limits (docs/api.md): the server's default and maximum timeout
 * (src/engine/rpc_invoker.cc; tests/tools/check_limits.py keeps them equal).
 */
const RPC_DEFAULT_TIMEOUT_MS = 10_000;
const RPC_MAX_TIMEOUT_MS = 60_000;

export interface FlowStartResult {
  flowId: string;
  runId: string;
  /** The request ID matched the existing run's: nothing new started (ignoreAlreadyStarted). */
  alreadyStarted: boolean;
}

/** Client.startFlowAndWait: a start's options, and how long to wait for the run's end. */
export interface FlowStartAndWaitOptions extends FlowStartOptions {
  /**
   * How long to wait for the run to close, through restarts and failovers
   * (as waitForFlow's timeoutMs). Default: no limit.
   */
  waitTimeoutMs?: number;
}

/** Client.startFlowAndWait: the start, and the run's description once it closed. */
export interface FlowStartAndWaitResult extends FlowStartResult {
  /** The run that closed (any status: check `status`; after continue-as-new, the chain's last run). */
  flow: FlowDescription;
}

/** Names a run: the latest of the Flow ID unless runId is given. */
export interface RunOptions extends CallOptions {
  runId?: string;
}

/**
 * A write's request ID (stopFlow, skipTimer, setAttributes): the run
 * remembers it, so a repeat of the write with the same ID changes nothing
 * and answers OK.
 */
export interface WriteOptions extends RunOptions {
  /**
   * Names this write (a dex name: 1..255 bytes, no control characters).
   * Default: a random one per call, kept across its repeats on other
   * processes; pass one to repeat a call whose outcome is unknown.
   */
  requestId?: string;
}

export interface StopFlowOptions extends WriteOptions {
  /** "cancel" (default): ends CANCELED; "terminate": TERMINATED; "fail": FAILED with `reason`. */
  mode?: "cancel" | "terminate" | "fail";
  reason?: string;
}

export type SkipTimerOptions = WriteOptions;

export type SetAttributesOptions = WriteOptions;

export interface TimeTravelOptions extends CallOptions {
  /**
   * Why: the history's TIME_TRAVELED (old run) and FLOW_STARTED (new run)
   * carry it, and so does the old run's close reason if it still ran.
   * Default: the server's "time travel".
   */
  reason?: string;
  /**
   * Names this time travel (a dex name). Default: a random one per call,
   * kept across its repeats on other processes; pass one to repeat a call
   * whose outcome is unknown: a repeat answers the run the first try made.
   */
  requestId?: string;
  /** Answers what the new run would start with (`start`, `attributes`) and changes nothing. */
  dryRun?: boolean;
}

/** Client.continueAsNew's options. */
export interface ContinueAsNewOptions extends CallOptions {
  /** Why: in the run's history (CONTINUE_AS_NEW_REQUESTED, the new run's FLOW_STARTED) and its close reason. */
  reason?: string;
  /**
   * Names this request (a dex name). Default: a random one per call, kept
   * across its repeats on other processes; a repeat with the same request ID
   * changes nothing (alreadyDone).
   */
  requestId?: string;
}

export interface ContinueAsNewResult {
  /** The new run ("<first run>.c<n>"), when the run continued at once; "" while pending. */
  newRunId: string;
  /**
   * Whether the run continues later: an attempt of it runs now, and it
   * continues once none does (waitForFlow with its runId follows it).
   */
  pending: boolean;
  /** A repeat of a request that landed, or a continue-as-new was pending already: nothing changed. */
  alreadyDone: boolean;
}

/** Client.updateFlowConfig's options. */
export interface UpdateFlowConfigOptions extends CallOptions {
  /** Fields that go back to the value of the run's Flow (its declaration), e.g. ["defaultDurability"]. */
  clear?: FlowConfigField[];
  /**
   * Names this update (a dex name). Default: a random one per call, kept
   * across its repeats on other processes; a repeat with the same request ID
   * changes nothing (alreadyDone).
   */
  requestId?: string;
}

/** A FlowConfig field, as updateFlowConfig's `clear` names it. */
export type FlowConfigField = keyof FlowConfig;

export interface UpdateFlowConfigResult {
  /** The run's effective config now, as getFlowState shows it. */
  config: EffectiveFlowConfig;
  /** A repeat of an update that landed, or an update that changed nothing. */
  alreadyDone: boolean;
  /** The run continued as new at once (a lowered threshold its history had passed); "" otherwise. */
  continuedRunId: string;
}

const FLOW_CONFIG_WIRE_NAMES: Record<FlowConfigField, string> = {
  continueAsNewAfterEvents: "continue_as_new_after_events",
  continueAsNewAfterBytes: "continue_as_new_after_bytes",
  defaultDurability: "default_durability",
  attributeStore: "attribute_store",
  indexActiveStepTypes: "index_active_step_types",
};

export interface TimeTravelResult {
  /** The new run; a dry run: an ID for the preview only, which no run gets. */
  runId: string;
  /**
   * A repeat of a time travel that landed (the same requestId and run):
   * runId is the run it made, and nothing changed. Also true when this
   * call's own first try landed and its answer was lost (a repeat after
   * UNAVAILABLE).
   */
  alreadyDone: boolean;
  /**
   * A dry run: the new run as it would start: its description (RUNNING,
   * traveledFromRunId), the Step executions active at the point (which run
   * again from WaitFor or Execute) and the timeout handler if it runs.
   * `workers` is empty. Absent after a real time travel.
   */
  start?: FlowState;
  /** A dry run: the new run's Attributes as it would start (those at the point). */
  attributes?: FlowAttributes;
}

export interface PublishOptions extends RunOptions {
  /** A ChannelMap's instance (a Channel from map.instance(key) carries its own). */
  instanceKey?: string;
  /**
   * Makes a repeat change nothing (a dex name). Default: a random one per
   * call, kept across its repeats on other processes.
   */
  requestId?: string;
}

export interface FlowWaitOptions {
  /** How long to keep waiting, through restarts and failovers. Default: no limit. */
  timeoutMs?: number;
  runId?: string;
  signal?: AbortSignal;
}

export interface HistoryOptions extends RunOptions {
  /** Events with a greater seq. Default: from the first event. */
  afterSeq?: number;
  /** Events per page: 0 or unset 100, at most 1,000. */
  pageSize?: number;
}

export interface HistoryWaitOptions extends FlowWaitOptions {
  /** Events with a greater seq. Default: from the first event. */
  afterSeq?: number;
}

export interface StepCompletion {
  /** The execution ended (DONE, FAILED, CANCELED) or its run closed; false: the wait timed out. */
  completed: boolean;
  phase: StepPhase;
}

/** waitForFlow's timeout passed before the run closed. `flow` is its last description. */
export class FlowWaitTimeoutError extends DexError {
  readonly flow: FlowDescription;
  constructor(details: string, flow: FlowDescription) {
    super("DEADLINE_EXCEEDED", details);
    this.name = "FlowWaitTimeoutError";
    this.flow = flow;
  }
}

// The pause between two rounds over every address: 50 ms doubling to 1 s.
const ROUND_BACKOFF_INITIAL_MS = 50;
const ROUND_BACKOFF_MAX_MS = 1000;
// How long a call keeps trying when no address could even be reached.
const UNREACHABLE_GRACE_MS = 1500;
// A new attempt needs at least this much of the deadline left.
const MIN_ATTEMPT_MS = 10;
// The waits ask the server for at most this per call (its limit is 60 s,
// kWaitMaxMs in src/engine/flow_waits.cc; tests/tools/check_limits.py checks
// that this stays below it), so that an unbounded wait never needs an
// unbounded deadline.
const FLOW_WAIT_PIECE_MS = 50_000;
// While no process serves a dex Flow wait, it asks again this often.
const FLOW_WAIT_RETRY_MS = 200;
/** How often waitForFlow asks whether a due Flow retry has started. */
const FLOW_RETRY_POLL_MS = 100;

interface Endpoint {
  address: string;
  flows: grpc.Client;
  admin: grpc.Client;
}

/**
 * The channels of one Client, one per address, made with the TLS files as
 * they were then. When a file changes, new calls get a new set and the old
 * one is closed once its last call ended.
 */
interface ChannelSet {
  endpoints: Endpoint[];
  /** Calls using it now. */
  calls: number;
  /** Replaced: closed when `calls` reaches 0. */
  retired: boolean;
}

function closeChannels(set: ChannelSet): void {
  for (const endpoint of set.endpoints) {
    endpoint.flows.close();
    endpoint.admin.close();
  }
}

type Service = "flows" | "admin";

/**
 * Whether a call may be sent again, to the same or another address, after it
 * may have reached a process (CallSpec.repeat):
 * - "read": it changes nothing (reads and long polls);
 * - "requestId": a write that carries a request ID, the same on every try,
 *   so a repeat of one that landed changes nothing (starts, publishes, RPCs,
 *   stops, skips, Attribute writes, time travels);
 * - "once": anything else. It moves on to another address only while nothing
 *   can have been sent (no connection made); an UNAVAILABLE from a process
 *   it reached ends the call, since that may have come after the write landed.
 */
type Repeat = "read" | "requestId" | "once";

interface CallSpec {
  service: Service;
  method: string;
  repeat: Repeat;
  /** Made again for every attempt. */
  request: () => unknown;
  timeoutMs: number;
  signal: AbortSignal | undefined;
  credential?: string;
  /**
   * Once a process of the node was reached (in this call or an earlier
   * one), keep trying unreachable addresses until the deadline instead of
   * for UNREACHABLE_GRACE_MS only: a restart or a failover delays the call
   * instead of failing it.
   */
  keepTryingOnceReached?: boolean;
  /**
   * While an attempt runs, re-check every second that its process is still
   * the active one (its gRPC health) and move on when it says NOT_SERVING or
   * misses two answers in a row (a long poll sends nothing while it waits,
   * so a frozen process would otherwise hold it).
   */
  watchReadiness?: boolean;
}

// The waits' re-checks of the process they wait on (watchReadiness).
const READINESS_WATCH_INTERVAL_MS = 1_000;
const READINESS_WATCH_MISSES = 2;

/**
 * A client of one dex node. A call moves on to the next address on
 * UNAVAILABLE or when no connection is made, and once this client has reached
 * a process it keeps searching until the call's deadline: a restart or a
 * failover delays a call instead of failing it. A call is sent again only
 * when a repeat is safe (CallSpec.repeat): reads and long polls, and writes
 * that carry a request ID, the same on every try, which the server remembers
 * per run so that a repeat of a write that landed changes nothing (startFlow,
 * publishToChannel, invokeRpc, stopFlow, skipTimer, setAttributes,
 * timeTravel: each takes `requestId`, random by default). Any other call
 * would be sent again only while nothing can have been sent (no connection
 * made). DEADLINE_EXCEEDED is never tried elsewhere (its outcome is unknown).
 */
export class Client {
  readonly addresses: readonly string[];
  private readonly timeoutMs: number;
  private readonly connectTimeoutMs: number;
  private readonly adminCredential: string | undefined;
  private readonly token: TokenSource;
  /** Constant after construction: the channels' credentials. */
  private readonly tls: TlsConfig;
  private channels: ChannelSet | undefined;
  /** Replaced sets that calls still use. */
  private readonly retiredChannels = new Set<ChannelSet>();
  private preferred = 0;
  // True once an address answered (preferred is then that address, not just
  // the first one by default).
  private preferredKnown = false;
  private closed = false;
  // A process of the node answered a call of this client at least once.
  private reachedOnce = false;

  /** Throws a DexError (INVALID_ARGUMENT) naming a bad or repeated address. */
  constructor(options: ClientOptions = {}) {
    this.addresses = effectiveAddresses(options.addresses, options.address);
    validateServerAddresses(this.addresses);
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.connectTimeoutMs = options.connectTimeoutMs ?? 2_000;
    if (!(this.timeoutMs > 0)) throw new DexError("INVALID_ARGUMENT", "ClientOptions.timeoutMs must be positive");
    if (!(this.connectTimeoutMs > 0)) {
      throw new DexError("INVALID_ARGUMENT", "ClientOptions.connectTimeoutMs must be positive");
    }
    this.adminCredential = options.adminCredential;
    this.token = new TokenSource(options.token, options.tokenFile);
    this.tls = new TlsConfig(options);
  }

  /** The address that answered the last call (the next call starts there). */
  get preferredAddress(): string {
    return this.addresses[this.preferred] ?? "";
  }

  /**
   * Starts a new run of a dex Flow (a Flow, or its type's name) under
   * `flowId`. The Flow type must have been declared by a Worker (its hello).
   */
  async startFlow(flow: Flow | string, flowId: string, input?: unknown, options: FlowStartOptions = {}): Promise<FlowStartResult> {
    return this.startRun(flowTypeOf(flow), timeoutHandlerOf(flow), flowId, input, options);
  }

  /**
   * Starts a new run like startFlow and waits for it to close, in one call
   * (StartFlow with waitTimeoutMs) instead of startFlow then waitForFlow: one
   * round trip less. Resolves with the start (runId, alreadyStarted) and the
   * run's description once it closed, as waitForFlow with that runId does: it
   * follows continue-as-new (the description is the chain's last run), not
   * Flow retries (`nextRunId` names one). Past the server's limit of one
   * wait (50 s a call here) it goes on with waitForFlow. Repeated like
   * startFlow: with a request ID and ignoreAlreadyStarted (the default) an
   * UNAVAILABLE, also during the wait, sends the same start to the next
   * address, which answers the run the first try started (alreadyStarted)
   * and waits for it. Rejects with a FlowWaitTimeoutError (its `flow` names
   * the run) when `waitTimeoutMs` passes first.
   */
  async startFlowAndWait(
    flow: Flow | string,
    flowId: string,
    input?: unknown,
    options: FlowStartAndWaitOptions = {},
  ): Promise<FlowStartAndWaitResult> {
    const waitMs = options.waitTimeoutMs;
    if (waitMs !== undefined && !(waitMs >= 0)) {
      throw new DexError("INVALID_ARGUMENT", "startFlowAndWait: waitTimeoutMs must not be negative");
    }
    const { request, repeat } = this.startRequest(flowTypeOf(flow), timeoutHandlerOf(flow), flowId, input, options);
    const end = waitMs === undefined ? Infinity : Date.now() + waitMs;
    const pieceMs = (): number => Math.max(1, Math.round(Math.min(end - Date.now(), FLOW_WAIT_PIECE_MS)));
    const first = pieceMs();
    // A long poll: each try asks for what is left of the wait, and the
    // process's readiness is watched meanwhile (a frozen or demoted one is
    // left for the next address, where the same start is safe to repeat).
    const response = await this.callSpec<{ runId: string; alreadyStarted: boolean; closed: boolean; flow: WireFlowDescription | null }>({
      service: "flows",
      method: "StartFlow",
      repeat,
      request: () => ({ ...request, waitTimeoutMs: pieceMs() }),
      timeoutMs: first + (options.timeoutMs ?? this.timeoutMs),
      signal: options.signal,
      keepTryingOnceReached: true,
      watchReadiness: true,
    });
    const started: FlowStartResult = { flowId, runId: response.runId, alreadyStarted: response.alreadyStarted };
    if (response.closed) return { ...started, flow: toFlowDescription(response.flow) };
    if (Date.now() >= end) {
      const last = toFlowDescription(response.flow);
      throw new FlowWaitTimeoutError(
        `the run of ${flowId} did not close within ${formatDuration(waitMs ?? 0)} (it is ${last.status})`,
        last,
      );
    }
    // Longer than one call waits: the rest on the run itself.
    const closed = await this.waitForFlow(flowId, {
      runId: response.runId,
      ...(end === Infinity ? {} : { timeoutMs: Math.max(0, end - Date.now()) }),
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    });
    return { ...started, flow: closed };
  }

  private async startRun(
    flowType: string,
    hasTimeoutHandler: boolean | undefined,
    flowId: string,
    input: unknown,
    options: FlowStartOptions,
  ): Promise<FlowStartResult> {
    const { request, repeat } = this.startRequest(flowType, hasTimeoutHandler, flowId, input, options);
    const response = await this.flowCall<{ runId: string; alreadyStarted: boolean }>("StartFlow", request, options, repeat);
    return { flowId, runId: response.runId, alreadyStarted: response.alreadyStarted };
  }

  /** A start's request (its request ID made once, for every try) and whether it may be repeated. */
  private startRequest(
    flowType: string,
    hasTimeoutHandler: boolean | undefined,
    flowId: string,
    input: unknown,
    options: FlowStartOptions,
  ): { request: Record<string, unknown>; repeat: Repeat } {
    checkName(flowType, "startFlow: the Flow type");
    checkName(flowId, "startFlow: the Flow ID");
    const start: Record<string, unknown> = { ...runStartOptionsToWire(options, "startFlow", hasTimeoutHandler) };
    if (options.idReusePolicy !== undefined) {
      start["idReusePolicy"] = enumValue(
        options.idReusePolicy,
        {
          allowIfNoRunning: "ALLOW_IF_NO_RUNNING",
          allowIfPreviousFailed: "ALLOW_IF_PREVIOUS_FAILED",
          disallow: "DISALLOW",
          terminateIfRunning: "TERMINATE_IF_RUNNING",
        },
        "idReusePolicy",
      );
    }
    // A repeat of this call on another process answers the run it started.
    if (options.requestId === undefined || options.requestId === "") {
      start["requestId"] = randomBytes(16).toString("hex");
      start["ignoreAlreadyStarted"] = true;
    } else {
      start["requestId"] = checkName(options.requestId, "startFlow: requestId");
      start["ignoreAlreadyStarted"] = options.ignoreAlreadyStarted ?? false;
    }
    const request = { flowId, flowType, input: valuePayload(input, "startFlow: input"), options: start };
    // The server answers a repeated start with its run only under
    // ignoreAlreadyStarted; without it a repeat of a start that landed could
    // start a second run (the first one closed meanwhile) or terminate the
    // first (terminateIfRunning), so such a start is sent once.
    const repeat: Repeat = start["ignoreAlreadyStarted"] === true ? "requestId" : "once";
    return { request, repeat };
  }

  /**
   * Ends a run: "cancel" (default), "terminate", or "fail" with a reason. The
   * request ID (random unless given) makes a repeat of a stop that landed
   * answer OK and change nothing.
   */
  async stopFlow(flowId: string, options: StopFlowOptions = {}): Promise<void> {
    const mode = enumValue(options.mode ?? "cancel", { cancel: "STOP_CANCEL", terminate: "STOP_TERMINATE", fail: "STOP_FAIL" }, "mode");
    const requestId = requestIdOf(options.requestId, "stopFlow");
    await this.flowWrite(
      "StopFlow",
      { flowId, runId: options.runId ?? "", mode, reason: options.reason ?? "", requestId },
      options,
      `the stop of ${flowId}`,
      requestId,
    );
  }

  /**
   * Appends `messages`, in order, to a Channel (or a ChannelMap instance) of
   * a RUNNING run. A Channel (or ChannelMap, with options.instanceKey)
   * encodes them with its codec (JSON by default); a name sends JSON. The request ID makes the call's retries
   * (through a failover) append them once.
   */
  async publishToChannel<T>(
    flowId: string,
    channel: Channel<T> | ChannelMap<T> | string,
    messages: T[],
    options: PublishOptions = {},
  ): Promise<void> {
    if (!Array.isArray(messages)) throw new DexError("INVALID_ARGUMENT", "publishToChannel: messages must be an array");
    if (messages.length > FLOW_LIMITS.messagesPerPublish) {
      throw new DexError("INVALID_ARGUMENT", `publishToChannel: ${messages.length} messages; the limit is ${FLOW_LIMITS.messagesPerPublish} per call`);
    }
    const name = typeof channel === "string" ? channel : channel.name;
    const codec = (typeof channel === "string" ? jsonCodec : channel.codec) as Codec<unknown>;
    const instanceKey = options.instanceKey ?? (channel instanceof Channel ? channel.instanceKey : "");
    if (channel instanceof ChannelMap && instanceKey === "") {
      throw new DexError("INVALID_ARGUMENT", `publishToChannel: the ChannelMap '${name}' needs an instanceKey (or pass map.instance(key))`);
    }
    const payloads = messages.map((m, i) => {
      try {
        return toPayload(m, `publishToChannel: message ${i + 1}`, codec);
      } catch (error) {
        throw new DexError("INVALID_ARGUMENT", error instanceof Error ? error.message : String(error));
      }
    });
    const requestId = requestIdOf(options.requestId, "publishToChannel");
    await this.flowCall(
      "PublishToChannel",
      { flowId, runId: options.runId ?? "", channel: name, instanceKey, messages: payloads, requestId },
      options,
      "requestId",
    );
  }

  /**
   * Fires a waiting execution's Timer condition now (by its index in the
   * wait, or its condition ID). The request ID (random unless given) makes a
   * repeat of a skip that landed answer OK and change nothing.
   */
  async skipTimer(flowId: string, stepExecutionId: string, timer: number | string, options: SkipTimerOptions = {}): Promise<void> {
    const requestId = requestIdOf(options.requestId, "skipTimer");
    const request: Record<string, unknown> = { flow: { flowId, runId: options.runId ?? "" }, stepExecutionId, requestId };
    if (typeof timer === "number") request["conditionIndex"] = timer;
    else request["conditionId"] = timer;
    await this.flowWrite("SkipTimer", request, options, `the skip of a Timer of ${stepExecutionId} of ${flowId}`, requestId);
  }

  /**
   * Fires the run's own Timer now: "flowTimeout" (the run's timeout policy
   * applies, as if its deadline had come) or "startDelay" (the start Step is
   * created). FAILED_PRECONDITION when the run has no such Timer pending. The
   * request ID works as skipTimer's.
   */
  async skipRunTimer(flowId: string, timer: "flowTimeout" | "startDelay", options: SkipTimerOptions = {}): Promise<void> {
    if (timer !== "flowTimeout" && timer !== "startDelay") {
      throw new DexError("INVALID_ARGUMENT", `skipRunTimer: the timer must be "flowTimeout" or "startDelay", not ${JSON.stringify(timer)}`);
    }
    const requestId = requestIdOf(options.requestId, "skipRunTimer");
    const runTimer = timer === "flowTimeout" ? "RUN_TIMER_FLOW_TIMEOUT" : "RUN_TIMER_START_DELAY";
    const request: Record<string, unknown> = { flow: { flowId, runId: options.runId ?? "" }, runTimer, requestId };
    await this.flowWrite("SkipTimer", request, options, `the skip of the ${timer} of ${flowId}`, requestId);
  }

  /**
   * Time travel: starts a new run of `flowId` from `point` in the history of
   * its latest run `runId` (named exactly; an earlier run is refused with
   * FAILED_PRECONDITION), with the state as it was there (Attributes, Channel
   * queues, the Step executions active then, which run again from WaitFor or
   * Execute, Timers and the flow timeout with the time they had left) and the
   * Flow type's latest declaration. The old run, if it still runs, ends
   * TERMINATED; the two link to each other (FlowDescription's
   * traveledFromRunId and traveledToRunId). The request ID (random unless
   * given) makes a repeat answer the run the first try made (alreadyDone)
   * instead of traveling twice. `dryRun` answers the run as it would start
   * (start, attributes) and changes nothing. Bad input is refused with
   * INVALID_ARGUMENT before anything is sent.
   */
  async timeTravel(flowId: string, runId: string, point: TimeTravelPoint, options: TimeTravelOptions = {}): Promise<TimeTravelResult> {
    checkName(flowId, "timeTravel: the Flow ID");
    // The server takes no default here: the run traveled from must be the one
    // the caller looked at, not whichever is latest when the call lands.
    if (typeof runId !== "string" || runId === "") {
      throw new DexError(
        "INVALID_ARGUMENT",
        "timeTravel: the run ID must be a non-empty string: time travel starts from the Flow ID's latest run, named exactly (describeFlow(flowId).runId)",
      );
    }
    checkName(runId, "timeTravel: the run ID");
    const wirePoint = timeTravelPointToWire(point, "timeTravel: point");
    if (options.reason !== undefined && typeof options.reason !== "string") {
      throw new DexError("INVALID_ARGUMENT", `timeTravel: reason must be a string, not ${String(options.reason)}`);
    }
    if (options.dryRun !== undefined && typeof options.dryRun !== "boolean") {
      throw new DexError("INVALID_ARGUMENT", `timeTravel: dryRun must be a boolean, not ${String(options.dryRun)}`);
    }
    const requestId = requestIdOf(options.requestId, "timeTravel");
    const request: WireTimeTravelRequest = {
      flow: { flowId, runId },
      point: wirePoint,
      reason: options.reason ?? "",
      requestId,
      dryRun: options.dryRun ?? false,
    };
    const response = await this.flowWrite<WireTimeTravelResponse>(
      "TimeTravel",
      request,
      options,
      `the time travel of ${flowId} from run ${runId}`,
      requestId,
    );
    const result: TimeTravelResult = { runId: response.runId, alreadyDone: response.alreadyDone };
    // Only a dry run answers the start (GetFlowState's shape) and its Attributes.
    if (response.start !== null && response.start !== undefined) {
      result.start = toFlowState(response.start);
      result.attributes = new FlowAttributes(response.runId, result.start.flow.status, (response.attributes ?? []).map(toAttributeEntry));
    }
    return result;
  }

  /**
   * Continue-as-new: the run `runId` (the Flow ID's latest, named exactly)
   * goes on as a new run of `flowId` ("<first run>.c<n>") that holds its
   * Attributes, Channel messages, active Step executions (same IDs), Timers
   * and timeout deadline, with a fresh history. At once when no attempt of the
   * run runs (newRunId), else once none does (pending). The old run closes
   * CONTINUED_AS_NEW with nextRunId naming the new one; waitForFlow on the old
   * run ID answers the run the chain ends with. A run that is not running is
   * refused with FAILED_PRECONDITION.
   */
  async continueAsNew(flowId: string, runId: string, options: ContinueAsNewOptions = {}): Promise<ContinueAsNewResult> {
    checkName(flowId, "continueAsNew: the Flow ID");
    if (typeof runId !== "string" || runId === "") {
      throw new DexError(
        "INVALID_ARGUMENT",
        "continueAsNew: the run ID must be a non-empty string: the Flow ID's latest run, named exactly (describeFlow(flowId).runId)",
      );
    }
    checkName(runId, "continueAsNew: the run ID");
    if (options.reason !== undefined && typeof options.reason !== "string") {
      throw new DexError("INVALID_ARGUMENT", `continueAsNew: reason must be a string, not ${String(options.reason)}`);
    }
    const requestId = requestIdOf(options.requestId, "continueAsNew");
    const request: WireTriggerContinueAsNewRequest = { flow: { flowId, runId }, reason: options.reason ?? "", requestId };
    const response = await this.flowWrite<WireTriggerContinueAsNewResponse>(
      "TriggerContinueAsNew",
      request,
      options,
      `the continue-as-new of ${flowId} run ${runId}`,
      requestId,
    );
    const newRunId = response.newRunId ?? "";
    return { newRunId, pending: newRunId === "", alreadyDone: response.alreadyDone ?? false };
  }

  /**
   * Changes the running run `runId` (named exactly)'s FlowConfig field by
   * field (docs/flow-rules.md, "FlowConfig"): each field `config` gives wins,
   * each field in `options.clear` goes back to its Flow's value, the others
   * stay. Recorded in the run's history (FLOW_CONFIG_UPDATED). Answers the
   * run's effective config now. A lowered continue-as-new threshold the
   * history passed continues the run (continuedRunId when at once). A closed
   * run, or a change of the run's Attribute Store, is refused with
   * FAILED_PRECONDITION; bad input with INVALID_ARGUMENT before anything is sent.
   */
  async updateFlowConfig(
    flowId: string,
    runId: string,
    config: FlowConfig,
    options: UpdateFlowConfigOptions = {},
  ): Promise<UpdateFlowConfigResult> {
    checkName(flowId, "updateFlowConfig: the Flow ID");
    if (typeof runId !== "string" || runId === "") {
      throw new DexError(
        "INVALID_ARGUMENT",
        "updateFlowConfig: the run ID must be a non-empty string: the run to change, named exactly (describeFlow(flowId).runId)",
      );
    }
    checkName(runId, "updateFlowConfig: the run ID");
    const wireConfig = flowConfigToWire(config, "updateFlowConfig: config");
    const clear = options.clear ?? [];
    if (!Array.isArray(clear)) throw new DexError("INVALID_ARGUMENT", "updateFlowConfig: clear must be an array of FlowConfig field names");
    const clearFields = clear.map((f, i) => {
      if (typeof f !== "string" || !Object.hasOwn(FLOW_CONFIG_WIRE_NAMES, f)) {
        throw new DexError(
          "INVALID_ARGUMENT",
          `updateFlowConfig: clear[${i}] '${String(f)}' is not a FlowConfig field (${Object.keys(FLOW_CONFIG_WIRE_NAMES).join(", ")})`,
        );
      }
      return FLOW_CONFIG_WIRE_NAMES[f];
    });
    if (Object.keys(wireConfig).length === 0 && clearFields.length === 0) {
      throw new DexError("INVALID_ARGUMENT", "updateFlowConfig: the config sets no field and clear names none: nothing to change");
    }
    const requestId = requestIdOf(options.requestId, "updateFlowConfig");
    const request: WireUpdateFlowConfigRequest = { flow: { flowId, runId }, config: wireConfig, clearFields, requestId };
    const response = await this.flowWrite<WireUpdateFlowConfigResponse>(
      "UpdateFlowConfig",
      request,
      options,
      `the FlowConfig update of ${flowId} run ${runId}`,
      requestId,
    );
    return {
      config: toEffectiveFlowConfig(response.config),
      alreadyDone: response.alreadyDone ?? false,
      continuedRunId: response.continuedRunId ?? "",
    };
  }

  /** The run's Attributes (the latest run unless runId is given, also after it closed). */
  async getAttributes(flowId: string, options: GetAttributesOptions = {}): Promise<FlowAttributes> {
    const keys = (options.keys ?? []).map((k, i) => attributeKeyOf(k, `getAttributes: keys[${i}]`));
    const response = await this.flowCall<{ runId: string; status: string; attributes: WireAttribute[] }>(
      "GetAttributes",
      { flow: { flowId, runId: options.runId ?? "" }, keys },
      options,
      "read",
    );
    return new FlowAttributes(response.runId, toRunStatus(response.status), response.attributes.map(toAttributeEntry));
  }

  /**
   * Writes Attributes of a RUNNING run, in order, all or none
   * (attr.write(v), map.write(key, v), attr.removal()). Answers the run's ID.
   * The request ID (random unless given) makes a repeat of a write that
   * landed change nothing: it never puts these values back over a later write.
   */
  async setAttributes(flowId: string, writes: AttributeWrite[], options: SetAttributesOptions = {}): Promise<{ runId: string }> {
    const wire = attributeWritesToWire(writes, "setAttributes", true);
    const requestId = requestIdOf(options.requestId, "setAttributes");
    const response = await this.flowWrite<{ runId: string }>(
      "SetAttributes",
      { flow: { flowId, runId: options.runId ?? "" }, writes: wire, requestId },
      options,
      `the Attribute writes to ${flowId}`,
      requestId,
    );
    return { runId: response.runId };
  }

  /**
   * Waits until a scalar Attribute (string, int64, double, bool, datetime)
   * equals `value`, the run closes, or `timeoutMs` passes (default: no
   * limit); `matched` says which.
   */
  async waitForAttribute<T extends AttributeValue>(
    flowId: string,
    attribute: Attribute<T> | AttributeMap<T>,
    value: T,
    options: AttributeWaitOptions = {},
  ): Promise<AttributeWaitResult<T>> {
    if (!(attribute instanceof Attribute) && !(attribute instanceof AttributeMap)) {
      throw new DexError("INVALID_ARGUMENT", "waitForAttribute needs an Attribute or AttributeMap (e.g. Attribute.string(key))");
    }
    if (attribute.type === "json" || attribute.type === "bytes") {
      throw new DexError("INVALID_ARGUMENT", `waitForAttribute: '${attribute.key}' is a ${attribute.type} Attribute; only scalars can be waited for`);
    }
    const isMap = attribute instanceof AttributeMap;
    const instanceKey = options.instanceKey ?? "";
    if (isMap !== (instanceKey !== "")) {
      throw new DexError(
        "INVALID_ARGUMENT",
        isMap ? `waitForAttribute: the AttributeMap '${attribute.key}' needs an instanceKey` : `waitForAttribute: '${attribute.key}' is not an AttributeMap; drop instanceKey`,
      );
    }
    const wanted = attributeValueToWire(attribute.type, value, `waitForAttribute: the value of '${attribute.key}'`);
    type Wire = { matched: boolean; current: WireAttributeValue | null; status: string };
    return this.flowWait(options, (pieceMs) => ({
      method: "WaitForAttribute",
      request: { flow: { flowId, runId: options.runId ?? "" }, key: attribute.key, instanceKey, value: wanted, timeoutMs: pieceMs },
      // A closed run ends the wait (an unknown status does not).
      done: (r: Wire) => r.matched || (r.status !== "FLOW_RUNNING" && r.status !== "FLOW_STATUS_UNSPECIFIED"),
      convert: (r: Wire | undefined): AttributeWaitResult<T> => ({
        matched: r?.matched ?? false,
        current: attributeValueFromWire(r?.current, `the Attribute '${attribute.key}'`) as T | undefined,
        status: r === undefined ? "UNSPECIFIED" : toRunStatus(r.status),
      }),
    }));
  }

  /**
   * Runs an RPC's handler on a Worker and answers its output once its result
   * (output, new Steps, Attribute writes, publishes) is durable. An Rpc gives
   * the codecs (options.codecs override them; a name means JSON). Rejects with
   * a DexError: FAILED_PRECONDITION (the handler threw: its message; or the
   * run is closed), DEADLINE_EXCEEDED (timeoutMs passed), INVALID_ARGUMENT
   * (no such RPC), UNAVAILABLE (no active process answered, or the process
   * changed before the result was committed: nothing of it was). Retries on
   * another process carry the same requestId, so a committed result is never
   * committed twice.
   */
  async invokeRpc<I = unknown, O = unknown>(
    flowId: string,
    rpc: Rpc<I, O> | string,
    input?: I,
    options: InvokeRpcOptions<I, O> = {},
  ): Promise<RpcCallResult<O>> {
    checkName(flowId, "invokeRpc: the Flow ID");
    const name = rpc instanceof Rpc ? rpc.name : checkName(rpc, "invokeRpc: the RPC name");
    const inputCodec = (options.codecs?.input ?? (rpc instanceof Rpc ? rpc.inputCodec : jsonCodec)) as Codec<unknown>;
    const outputCodec = (options.codecs?.output ?? (rpc instanceof Rpc ? rpc.outputCodec : jsonCodec)) as Codec<unknown>;
    const timeoutMs = options.timeoutMs ?? RPC_DEFAULT_TIMEOUT_MS;
    if (typeof timeoutMs !== "number" || !Number.isFinite(timeoutMs) || timeoutMs <= 0 || timeoutMs > RPC_MAX_TIMEOUT_MS) {
      throw new DexError("INVALID_ARGUMENT", `invokeRpc: timeoutMs must be more than 0 and at most ${RPC_MAX_TIMEOUT_MS}, not ${String(timeoutMs)}`);
    }
    const requestId = requestIdOf(options.requestId, "invokeRpc");
    const lockKeys = rpcLockKeysOf(options.lockKeys);
    let payload: WirePayload;
    try {
      payload = toPayload(input, `invokeRpc: the input of RPC '${name}'`, inputCodec);
    } catch (error) {
      throw new DexError("INVALID_ARGUMENT", error instanceof Error ? error.message : String(error));
    }
    const end = Date.now() + timeoutMs;
    let response: { runId: string; output: WirePayload | null };
    try {
      response = await this.callSpec<{ runId: string; output: WirePayload | null }>({
        service: "flows",
        method: "InvokeRpc",
        repeat: "requestId",
        // A retry on another process waits only for what is left of the timeout.
        request: () => ({
          flow: { flowId, runId: options.runId ?? "" },
          name,
          input: payload,
          timeoutMs: Math.max(1, Math.round(end - Date.now())),
          requestId,
          lockKeys,
        }),
        timeoutMs: timeoutMs + this.timeoutMs,
        signal: options.signal,
        keepTryingOnceReached: true,
      });
    } catch (error) {
      if (error instanceof DexError && error.code === "DEADLINE_EXCEEDED") {
        throw new DexError(
          "DEADLINE_EXCEEDED",
          `RPC '${name}' of ${flowId} did not complete within ${formatDuration(timeoutMs)} (its outcome is unknown; ` +
            `a retry with request ID '${requestId}' answers it if it was committed): ${error.details}`,
          { ...(error.address === undefined ? {} : { address: error.address }), cause: error },
        );
      }
      throw error;
    }
    let output: unknown;
    try {
      output = fromPayload(response.output, outputCodec);
    } catch (error) {
      throw new DexError(
        "INVALID_ARGUMENT",
        `the output of RPC '${name}' cannot be decoded: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
    return { runId: response.runId, output: output as O };
  }

  /** The run's IDs, type, status, times, result (outputs), input and runs of its Flow ID. */
  async describeFlow(flowId: string, options: RunOptions = {}): Promise<FlowDescription> {
    return toFlowDescription(
      await this.flowCall<WireFlowDescription>("DescribeFlow", { flowId, runId: options.runId ?? "" }, options, "read"),
    );
  }

  /** The description, the active Step executions and the Workers that host the type. */
  async getFlowState(flowId: string, options: RunOptions = {}): Promise<FlowState> {
    return toFlowState(
      await this.flowCall<WireGetFlowStateResponse>("GetFlowState", { flowId, runId: options.runId ?? "" }, options, "read"),
    );
  }

  /** One page of the run's history events (after `afterSeq`, or from the first). */
  async getHistoryEvents(flowId: string, options: HistoryOptions = {}): Promise<HistoryPage> {
    const request = {
      flow: { flowId, runId: options.runId ?? "" },
      afterSeq: options.afterSeq ?? 0,
      fromStart: options.afterSeq === undefined,
      pageSize: options.pageSize ?? 0,
    };
    return toHistoryPage(await this.flowCall<WireGetHistoryEventsResponse>("GetHistoryEvents", request, options, "read"));
  }

  /** Every history event of the run so far, page after page. */
  async *iterateHistoryEvents(flowId: string, options: HistoryOptions = {}): AsyncGenerator<HistoryEvent> {
    let afterSeq = options.afterSeq;
    for (;;) {
      const page = await this.getHistoryEvents(flowId, { ...options, ...(afterSeq === undefined ? {} : { afterSeq }) });
      yield* page.events;
      const last = page.events[page.events.length - 1];
      if (!page.more || last === undefined) return;
      afterSeq = last.seq;
    }
  }

  /**
   * One page of the runs a visibility query selects (SearchFlows; the query
   * language: the README's "Finding Flows"): a filter over the system fields
   * (FlowId, RunId, FlowType, Status, StartTime, CloseTime, ExecutionDuration,
   * ParentFlowId, ActiveStepTypes) and indexed Attributes by index key, then
   * an optional ORDER BY (default StartTime DESC); "" selects every run. A
   * read: asked again on UNAVAILABLE, through failovers, like the other
   * reads. A query the server refuses rejects with a DexError
   * INVALID_ARGUMENT whose message names the position ("query: at position
   * 7: ...").
   */
  async searchFlows(query = "", options: SearchFlowsOptions = {}): Promise<FlowSearchPage> {
    const request = searchRequest(query, options, "searchFlows");
    return toSearchPage(await this.flowCall<WireSearchFlowsResponse>("SearchFlows", request, options, "read"));
  }

  /**
   * Every run the query selects, page after page (`pageSize` rows per call;
   * `pageToken` starts at a later page): `for await (const row of
   * client.searchAllFlows("Plan = 'gold'")) ...`. Each page answers from the
   * state when it is asked for, so a run whose values change meanwhile may
   * be seen twice or not at all when the query orders by them (the default,
   * StartTime DESC, does not change).
   */
  async *searchAllFlows(query = "", options: SearchFlowsOptions = {}): AsyncGenerator<FlowSearchRow, void, undefined> {
    let pageToken = options.pageToken ?? "";
    for (;;) {
      const page = await this.searchFlows(query, { ...options, pageToken });
      yield* page.rows;
      if (page.nextPageToken === "") return;
      if (page.nextPageToken === pageToken) {
        throw new DexError("INTERNAL", "searchAllFlows: the server answered the same page token again");
      }
      pageToken = page.nextPageToken;
    }
  }

  /**
   * What a query can name (ListSearchKeys): the system fields, then the index
   * keys in use, each with its index type, whether it may follow ORDER BY and
   * the Flow types declaring it. For a query editor's completion. A read.
   */
  async listSearchKeys(options: CallOptions = {}): Promise<SearchKeys> {
    return toSearchKeys(await this.flowCall<WireListSearchKeysResponse>("ListSearchKeys", {}, options, "read"));
  }

  /**
   * Distinct values of a KEYWORD or KEYWORD_ARRAY field (an index key, or
   * FlowType, Status, FlowId, ...) that start with `prefix`, in byte order, at
   * most `limit` (ListSearchValues). Rejects with INVALID_ARGUMENT for an
   * unknown key or one of another index type, in the server's words. A read.
   */
  async listSearchValues(key: string, options: SearchValuesOptions = {}): Promise<SearchValues> {
    const request = searchValuesRequest(key, options);
    return toSearchValues(await this.flowCall<WireListSearchValuesResponse>("ListSearchValues", request, options, "read"));
  }

  /**
   * Waits until the run has events after `afterSeq` (or any, from the
   * first) and answers them, or `timeoutMs` passes (an empty page).
   */
  async waitForHistoryEvent(flowId: string, options: HistoryWaitOptions = {}): Promise<HistoryPage> {
    return this.flowWait(options, (pieceMs) => ({
      method: "WaitForHistoryEvent",
      request: {
        flow: { flowId, runId: options.runId ?? "" },
        afterSeq: options.afterSeq ?? 0,
        fromStart: options.afterSeq === undefined,
        timeoutMs: pieceMs,
      },
      done: (r: WireGetHistoryEventsResponse) => r.events.length > 0,
      convert: (r: WireGetHistoryEventsResponse | undefined) =>
        r === undefined ? { runId: "", events: [], more: false } : toHistoryPage(r),
    }));
  }

  /**
   * Resolves with the run's description once it closed (any status: check
   * `status`). Without `runId` it follows Flow retries: a run that closed
   * with a retry to follow (`nextRunId`) is waited past, so the answer is the
   * last run's. Both ways it follows continue-as-new: a run (named or
   * latest) that continued as new is waited past to the run its chain ends
   * with, whose description answers (never status CONTINUED_AS_NEW). Keeps waiting through restarts and failovers; rejects with a
   * FlowWaitTimeoutError when `timeoutMs` passes first.
   */
  async waitForFlow(flowId: string, options: FlowWaitOptions = {}): Promise<FlowDescription> {
    if (options.timeoutMs !== undefined && !(options.timeoutMs >= 0)) {
      throw new DexError("INVALID_ARGUMENT", "timeoutMs must not be negative");
    }
    const end = options.timeoutMs === undefined ? Infinity : Date.now() + options.timeoutMs;
    const left = (): FlowWaitOptions => (end === Infinity ? { ...options } : { ...options, timeoutMs: Math.max(0, end - Date.now()) });
    let closed = await this.waitForRun(flowId, left(), options.timeoutMs ?? 0);
    // Bounded by the runs the retry policy allows (and the deadline).
    while (options.runId === undefined && closed.nextRunId !== "") {
      const next = await this.retryStarted(flowId, closed, end, options.signal);
      if (next === null) break; // nothing follows after all: this run is the last
      if (next === undefined) {
        throw new FlowWaitTimeoutError(
          `the run of ${flowId} did not close within ${formatDuration(options.timeoutMs ?? 0)} ` +
            `(run ${closed.runId} is ${closed.status}; its Flow retry ${closed.nextRunId} has not started)`,
          closed,
        );
      }
      closed = await this.waitForRun(flowId, { ...left(), runId: next }, options.timeoutMs ?? 0);
    }
    return closed;
  }

  /**
   * The run that took the Flow ID after `closed` (its Flow retry, or another
   * start), once it exists: asks every FLOW_RETRY_POLL_MS, and not before the
   * retry is due; null when none follows after all, undefined when `end`
   * passes first.
   */
  private async retryStarted(
    flowId: string,
    closed: FlowDescription,
    end: number,
    signal: AbortSignal | undefined,
  ): Promise<string | null | undefined> {
    for (;;) {
      const latest = await this.describeFlow(flowId, signal === undefined ? {} : { signal });
      if (latest.runId !== closed.runId) return latest.runId;
      if (latest.nextRunId === "") return null;
      const pause = Math.max(FLOW_RETRY_POLL_MS, Math.min(latest.retryAt - Date.now(), FLOW_WAIT_PIECE_MS));
      if (Date.now() + pause > end) return undefined;
      await sleep(pause, signal);
    }
  }

  /** One run's wait: its description once closed; a FlowWaitTimeoutError when `timeoutMs` passes first. */
  private async waitForRun(flowId: string, options: FlowWaitOptions, totalMs: number): Promise<FlowDescription> {
    const response = await this.flowWait(options, (pieceMs) => ({
      method: "WaitForFlow",
      request: { flow: { flowId, runId: options.runId ?? "" }, timeoutMs: pieceMs },
      done: (r: { closed: boolean }) => r.closed,
      convert: (r: { closed: boolean; flow: WireFlowDescription | null } | undefined) => r,
    }));
    if (response === undefined || !response.closed) {
      const flow = response === undefined ? await this.describeFlow(flowId, options.runId === undefined ? {} : { runId: options.runId }).catch(() => toFlowDescription(null)) : toFlowDescription(response.flow);
      throw new FlowWaitTimeoutError(
        `the run of ${flowId} did not close within ${formatDuration(totalMs)} (it is ${flow.status})`,
        flow,
      );
    }
    return toFlowDescription(response.flow);
  }

  /**
   * Waits until a Step execution ("<StepType>-<n>") ends (DONE, FAILED,
   * CANCELED) or its run closes; one not started yet is waited for while the
   * run is RUNNING. `completed: false` when `timeoutMs` passed first.
   */
  async waitForStepCompletion(flowId: string, stepExecutionId: string, options: FlowWaitOptions = {}): Promise<StepCompletion> {
    return this.flowWait(options, (pieceMs) => ({
      method: "WaitForStepCompletion",
      request: { flow: { flowId, runId: options.runId ?? "" }, stepExecutionId, timeoutMs: pieceMs },
      done: (r: { completed: boolean }) => r.completed,
      convert: (r: { completed: boolean; phase: string } | undefined): StepCompletion => ({
        completed: r?.completed ?? false,
        phase: (r === undefined ? "UNSPECIFIED" : r.phase.replace(/^PHASE_/, "")) as StepPhase,
      }),
    }));
  }

  /**
   * A dex Flow call: keeps searching for the active process until its
   * deadline once one was reached. `repeat` says whether it may be sent again
   * (Repeat); a write's request must hold its request ID, built once here so
   * that every try carries the same one.
   */
  private async flowCall<Response>(method: string, request: unknown, options: CallOptions, repeat: Repeat): Promise<Response> {
    return this.callSpec<Response>({
      service: "flows",
      method,
      repeat,
      request: () => request,
      timeoutMs: options.timeoutMs ?? this.timeoutMs,
      signal: options.signal,
      keepTryingOnceReached: true,
    });
  }

  /**
   * A write with a request ID (flowCall, "requestId"); DEADLINE_EXCEEDED (the
   * outcome is unknown) says which request ID a repeat must carry.
   */
  private async flowWrite<Response>(method: string, request: unknown, options: CallOptions, what: string, requestId: string): Promise<Response> {
    try {
      return await this.flowCall<Response>(method, request, options, "requestId");
    } catch (error) {
      if (error instanceof DexError && error.code === "DEADLINE_EXCEEDED") {
        throw new DexError(
          "DEADLINE_EXCEEDED",
          `${error.details} (the outcome of ${what} is unknown; a repeat with request ID '${requestId}' changes nothing if it landed)`,
          { ...(error.address === undefined ? {} : { address: error.address }), cause: error },
        );
      }
      throw error;
    }
  }

  /**
   * A long poll in pieces of at most FLOW_WAIT_PIECE_MS until `done` or the
   * wait's end; UNAVAILABLE (no process serves for a moment) asks again,
   * every FLOW_WAIT_RETRY_MS, until the end; any other error ends it.
   */
  private async flowWait<Wire, Out>(
    options: FlowWaitOptions,
    piece: (pieceMs: number) => {
      method: string;
      request: unknown;
      done: (r: Wire) => boolean;
      convert: (r: Wire | undefined) => Out;
    },
  ): Promise<Out> {
    const { signal } = options;
    if (options.timeoutMs !== undefined && !(options.timeoutMs >= 0)) {
      throw new DexError("INVALID_ARGUMENT", "timeoutMs must not be negative");
    }
    const end = options.timeoutMs === undefined ? Infinity : Date.now() + options.timeoutMs;
    let last: Wire | undefined;
    for (;;) {
      const pieceMs = Math.max(1, Math.round(Math.min(end - Date.now(), FLOW_WAIT_PIECE_MS)));
      const spec = piece(pieceMs);
      try {
        last = await this.callSpec<Wire>({
          service: "flows",
          method: spec.method,
          repeat: "read",
          request: () => spec.request,
          timeoutMs: pieceMs + this.timeoutMs,
          signal,
          keepTryingOnceReached: true,
          watchReadiness: true,
        });
        if (spec.done(last) || Date.now() >= end) return spec.convert(last);
      } catch (error) {
        if (signal?.aborted) throw error;
        if (!(error instanceof DexError) || error.code !== "UNAVAILABLE" || Date.now() + FLOW_WAIT_RETRY_MS >= end) {
          if (error instanceof DexError && error.code === "UNAVAILABLE" && Date.now() + FLOW_WAIT_RETRY_MS >= end) {
            return spec.convert(last);
          }
          throw error;
        }
        await sleep(FLOW_WAIT_RETRY_MS, signal);
      }
    }
  }

  /** AdminService.Describe: the active process's node ID, epoch and holder. */
  async describe(options: CallOptions = {}): Promise<NodeDescription> {
    const response = await this.callSpec<WireDescribeResponse>({
      service: "admin",
      method: "Describe",
      repeat: "read",
      request: () => ({}),
      timeoutMs: options.timeoutMs ?? this.timeoutMs,
      signal: options.signal,
      ...(this.adminCredential === undefined ? {} : { credential: this.adminCredential }),
    });
    return { nodeId: response.nodeId, nodeEpoch: response.nodeEpoch, holderProcessId: response.holderProcessId };
  }

  /** Closes the connections. Calls after close() reject with CANCELLED. */
  close(): void {
    this.closed = true;
    if (this.channels !== undefined) closeChannels(this.channels);
    for (const set of this.retiredChannels) closeChannels(set);
    this.retiredChannels.clear();
    this.channels = undefined;
  }

  // ------------------------------------------------------------------ inside

  /**
   * The readiness of every endpoint (health name ""), asked at once; every
   * answer is awaited until `deadline`, so that of two SERVING the same goes
   * first each round and the other is tried in that round too.
   */
  private async probe(endpoints: Endpoint[], deadline: number): Promise<Readiness[]> {
    const results: Readiness[] = endpoints.map(() => "noAnswer");
    const calls: grpc.ClientUnaryCall[] = [];
    let timer: NodeJS.Timeout | undefined;
    try {
      await new Promise<void>((resolve) => {
        let answered = 0;
        timer = setTimeout(resolve, Math.max(0, deadline - Date.now()));
        endpoints.forEach((endpoint, i) => {
          void checkReadiness(endpoint.flows, "", deadline, calls).then((r) => {
            results[i] = r;
            if (++answered === endpoints.length) resolve();
          });
        });
      });
    } finally {
      if (timer !== undefined) clearTimeout(timer);
      for (const call of calls) call.cancel();
    }
    return results;
  }

  /** The channels for one call; releaseChannels when it ends. */
  private acquireChannels(): ChannelSet {
    if (this.closed) throw new DexError("CANCELLED", "the client is closed");
    // A rotated TLS file: new connections use it, open calls keep theirs.
    if (this.channels !== undefined && this.tls.changed()) {
      const old = this.channels;
      this.channels = undefined;
      old.retired = true;
      if (old.calls === 0) closeChannels(old);
      else this.retiredChannels.add(old);
    }
    if (this.channels === undefined) {
      const { FlowService, AdminService } = services();
      // Every address with the same credentials, the files read now (tls.ts).
      const { credentials, options } = this.tls.forChannel();
      const endpoints = this.addresses.map((address) => {
        const flows = new FlowService(address, credentials, { ...channelOptions(100, 1000), ...options });
        // The same channel for both services.
        const admin = new AdminService(address, credentials, { channelOverride: flows.getChannel() });
        return { address, flows, admin };
      });
      this.channels = { endpoints, calls: 0, retired: false };
    }
    this.channels.calls++;
    return this.channels;
  }

  private releaseChannels(set: ChannelSet): void {
    set.calls--;
    if (set.retired && set.calls === 0 && this.retiredChannels.delete(set)) closeChannels(set);
  }

  private async callSpec<Response>(spec: CallSpec): Promise<Response> {
    const channels = this.acquireChannels();
    try {
      return await this.search<Response>(spec, channels.endpoints);
    } finally {
      this.releaseChannels(channels);
    }
  }

  /**
   * The search for the active process: starting at the preferred address,
   * each address in turn; UNAVAILABLE or no connection moves on to the next,
   * any other answer ends the call (and makes its address the preferred one).
   * A short backoff between full rounds, the whole within the deadline. When
   * no process could be reached at all for UNREACHABLE_GRACE_MS, the call
   * ends: nothing listens.
   */
  private async search<Response>(spec: CallSpec, endpoints: Endpoint[]): Promise<Response> {
    const { signal } = spec;
    if (signal?.aborted) throw abortReason(signal);
    const n = endpoints.length;
    const start = Date.now();
    const deadline = start + spec.timeoutMs;
    const first = this.preferred % n;
    const said: (DexError | undefined)[] = new Array<DexError | undefined>(n).fill(undefined);
    let backoff = ROUND_BACKOFF_INITIAL_MS;
    // Since when no address could even be reached (undefined: one was).
    let unreachableSince: number | undefined;
    // A connection was made, or a process answered, in this call.
    let everReached = false;
    const metadata = new grpc.Metadata();
    // An admin call's own credential, else the client's token.
    const credential = spec.credential !== undefined && spec.credential !== "" ? spec.credential : this.token.get();
    if (credential !== undefined && credential !== "") {
      metadata.set("authorization", `Bearer ${credential}`);
    }

    const exhausted = (): DexError => {
      const elapsed = Date.now() - start;
      const answered = said.filter((s): s is DexError => s !== undefined);
      if (answered.length === 0) {
        return new DexError(
          "DEADLINE_EXCEEDED",
          `the deadline (${formatDuration(spec.timeoutMs)}) passed before ${this.addresses.join(", ")} could be called`,
        );
      }
      const keptTrying = `kept trying for ${formatDuration(spec.timeoutMs)}`;
      if (n === 1 && answered[0] !== undefined) {
        const only = answered[0];
        return new DexError(only.code, elapsed >= spec.timeoutMs - MIN_ATTEMPT_MS ? `${only.details} (${keptTrying})` : only.details, {
          address: only.address ?? "",
          cause: only,
        });
      }
      const parts: string[] = [];
      for (let k = 0; k < n; k++) {
        const i = (first + k) % n;
        const s = said[i];
        parts.push(s === undefined ? `${endpoints[i]?.address}: not tried (no time left)` : s.details);
      }
      return new DexError(
        "UNAVAILABLE",
        `no active dex process at any of ${n} addresses (${
          elapsed >= spec.timeoutMs - MIN_ATTEMPT_MS ? keptTrying : "none could be reached"
        }); ${parts.join("; ")}`,
      );
    };

    for (let round = 0; ; round++) {
      let reachedAProcess = false;
      let firstFailure: number | undefined; // when this round first found an address unreachable
      // Which address to start at, and which to skip: with several addresses,
      // when the one that answered last is not known or just failed, ask them
      // all at once. The one SERVING goes first; one that does not answer at
      // all (a frozen process accepts connections and then says nothing) is
      // skipped while another answers, instead of holding the call.
      let order = Array.from({ length: n }, (_, k) => (first + k) % n);
      if (n > 1 && (round > 0 || !this.preferredKnown)) {
        if (Date.now() >= deadline) throw exhausted();
        // The call's deadline may cut the probe short: an address silent then
        // was given less than the probe's full wait, so it is not called frozen.
        const probeStart = Date.now();
        const probeUntil = Math.min(deadline, probeStart + READINESS_PROBE_TIMEOUT_MS);
        const cutShort = probeUntil < probeStart + READINESS_PROBE_TIMEOUT_MS;
        const readiness = await this.probe(endpoints, probeUntil);
        if (signal?.aborted) throw abortReason(signal);
        order = searchOrder(readiness, first);
        for (let i = 0; i < n; i++) {
          if (order.includes(i)) continue;
          reachedAProcess = true; // another address answered the probe
          said[i] = skippedAfterProbe(said[i], endpoints[i]?.address ?? "", cutShort ? probeUntil - probeStart : undefined);
        }
      }
      for (const i of order) {
        const endpoint = endpoints[i] as Endpoint;
        if (signal?.aborted) throw abortReason(signal);
        const now = Date.now();
        // An attempt with next to no time left could only end in
        // DEADLINE_EXCEEDED, hiding what the addresses answered so far.
        if (now >= deadline - MIN_ATTEMPT_MS && said.some((s) => s !== undefined)) throw exhausted();
        if (now >= deadline) throw exhausted();
        // Connect first, bounded: an address where nothing answers costs at
        // most connectTimeoutMs, and nothing has been sent to it.
        const connectUntil = Math.min(deadline, now + this.connectTimeoutMs);
        const state = await waitForConnection(endpoint.flows.getChannel(), connectUntil);
        if (signal?.aborted) throw abortReason(signal);
        if (state === grpc.connectivityState.IDLE || state === grpc.connectivityState.CONNECTING) {
          said[i] = new DexError(
            "UNAVAILABLE",
            `the server is not reachable at ${endpoint.address} (no connection within ${formatDuration(
              connectUntil - now,
            )})`,
            { address: endpoint.address },
          );
          firstFailure ??= Date.now();
          continue;
        }
        // READY, or TRANSIENT_FAILURE: then the call fails at once with
        // gRPC's reason and sends nothing.
        const client = spec.service === "flows" ? endpoint.flows : endpoint.admin;
        if (state === grpc.connectivityState.READY) everReached = true;
        try {
          const response =
            spec.watchReadiness === true
              ? await watchedCall<Response>(client, spec.method, spec.request(), deadline, metadata, signal)
              : await unaryCall<Response>(client, spec.method, spec.request(), deadline, metadata, signal);
          this.preferred = i;
          this.preferredKnown = true;
          this.reachedOnce = true;
          return response;
        } catch (error) {
          if (signal?.aborted) throw abortReason(signal);
          if (!isServiceError(error)) throw error;
          let mapped = errorFromGrpc(error, endpoint.address, spec.timeoutMs);
          // grpc-js's "Failed to connect" does not say why: a TLS handshake
          // the server refused says so in one more connection (tls.ts).
          if (mapped.code === "UNAVAILABLE" && wantsDiagnosis(error.details ?? "", this.tls.enabled)) {
            const { why } = await this.tls.diagnose(endpoint.address, deadline - Date.now());
            if (signal?.aborted) throw abortReason(signal);
            if (why !== "") {
              mapped = new DexError("UNAVAILABLE", `the connection to ${endpoint.address} failed: ${why} (${error.details ?? ""})`, {
                address: endpoint.address,
                cause: error,
              });
            }
          }
          // CANCELLED here is the server's doing: the caller's signal is not
          // aborted and the readiness watch rejects with UNAVAILABLE. A process
          // replacing its listener at a role change, or dying, ends the calls
          // still open on it. Like UNAVAILABLE, a call that may be repeated is
          // asked again (as the C++ client does); one sent "once" is not.
          if (error.code === grpc.status.CANCELLED && spec.repeat !== "once") {
            mapped = new DexError("UNAVAILABLE", `the server at ${endpoint.address} ended the call (${mapped.message})`, {
              address: endpoint.address,
              cause: error,
            });
          }
          if (mapped.code !== "UNAVAILABLE") {
            // An answer (or DEADLINE_EXCEEDED: the outcome is unknown and the
            // deadline is spent): it ends the search.
            if (mapped.code !== "DEADLINE_EXCEEDED") {
              this.preferred = i;
              this.preferredKnown = true;
              this.reachedOnce = true;
              throw mapped;
            }
            // The next call asks every address first rather than wait on this
            // one again: it may be frozen.
            this.preferredKnown = false;
            const before = said.filter((x): x is DexError => x !== undefined).map((x) => x.details);
            if (before.length === 0) throw mapped;
            throw new DexError(mapped.code, `${mapped.details}; before that: ${before.join("; ")}`, {
              address: endpoint.address,
              cause: error,
            });
          }
          // A call that must not be repeated ends here once it may have been
          // sent: over a connection that was up, even gRPC's words for a lost
          // connection may come after the process received it.
          if (spec.repeat === "once" && state === grpc.connectivityState.READY) throw mapped;
          if (isConnectionFailure(error.details ?? "")) firstFailure ??= Date.now();
          else {
            reachedAProcess = true;
            everReached = true;
          }
          said[i] = mapped;
        }
      }
      const now = Date.now();
      if (reachedAProcess) {
        unreachableSince = undefined;
      } else {
        // Nothing listens anywhere: keep trying only briefly, which covers a
        // server replacing its listener at a role change or a quick restart,
        // and still fails fast on a wrong address. Counted from the first
        // failure of the rounds that reached nobody (the C++ client counts
        // from the call's start), so that a long call (a wait) broken by a
        // restart gets the same grace as a new one.
        unreachableSince ??= firstFailure ?? now;
        const keepTrying = spec.keepTryingOnceReached === true && (everReached || this.reachedOnce);
        if (!keepTrying && now - unreachableSince >= UNREACHABLE_GRACE_MS) throw exhausted();
      }
      if (now >= deadline) throw exhausted();
      await sleep(Math.min(jitter(backoff), deadline - now), signal);
      backoff = Math.min(backoff * 2, ROUND_BACKOFF_MAX_MS);
    }
  }
}

/**
 * unaryCall, re-checking the process's readiness while it runs (CallSpec's
 * watchReadiness); when the watch gives up on the process the call is
 * cancelled and rejects with UNAVAILABLE saying why, so the search moves on.
 */
async function watchedCall<Response>(
  client: grpc.Client,
  method: string,
  request: unknown,
  deadline: number,
  metadata: grpc.Metadata,
  signal: AbortSignal | undefined,
): Promise<Response> {
  const stop = new AbortController();
  const forward = (): void => stop.abort(signal?.reason);
  signal?.addEventListener("abort", forward, { once: true });
  let why: string | undefined;
  let misses = 0;
  let timer: NodeJS.Timeout | undefined;
  let done = false;
  // A check starts every interval (at once after one that took longer).
  const check = (next: number): void => {
    timer = setTimeout(() => {
      // "": the process's own readiness, which every service of the active process shares.
      void checkReadiness(client, "", Date.now() + READINESS_PROBE_TIMEOUT_MS).then((r) => {
        if (done) return;
        if (r === "serving" || r === "answered") misses = 0;
        else if (r === "notServing") why = "it answered that it is no longer serving";
        else if (++misses >= READINESS_WATCH_MISSES) why = `it did not answer ${misses} health checks in a row`;
        if (why !== undefined) stop.abort();
        else check(Math.max(next + READINESS_WATCH_INTERVAL_MS, Date.now()));
      });
    }, Math.max(0, next - Date.now()));
  };
  check(Date.now() + READINESS_WATCH_INTERVAL_MS);
  try {
    return await unaryCall<Response>(client, method, request, deadline, metadata, stop.signal);
  } catch (error) {
    if (why !== undefined && !(signal?.aborted ?? false)) {
      throw Object.assign(new Error(`during the wait ${why}`), {
        code: grpc.status.UNAVAILABLE,
        details: `during the wait ${why}`,
        metadata: new grpc.Metadata(),
      });
    }
    throw error;
  } finally {
    done = true;
    if (timer !== undefined) clearTimeout(timer);
    signal?.removeEventListener("abort", forward);
  }
}

/**
 * What is said of an address the search skipped because it did not answer the
 * readiness probe while another did. `cutShortMs`: the call's deadline ended
 * the probe after that long, before its full wait; the silence then says
 * little, so what the address answered earlier in this call (`before`) is the
 * better report, and without one the report says how short the wait was
 * rather than calling the process frozen.
 */
function skippedAfterProbe(before: DexError | undefined, address: string, cutShortMs: number | undefined): DexError {
  if (cutShortMs === undefined) {
    return new DexError(
      "UNAVAILABLE",
      `the server at ${address} did not answer a health check within ${formatDuration(
        READINESS_PROBE_TIMEOUT_MS,
      )} (a frozen or cut-off process); not tried`,
      { address },
    );
  }
  if (before !== undefined) return before;
  return new DexError(
    "UNAVAILABLE",
    `the server at ${address} did not answer a health check in the ${formatDuration(
      cutShortMs,
    )} left before the deadline; not tried`,
    { address },
  );
}

/** A Flow's type (also of a Flow of another copy of this package: it has a declaration), or a type name as it is. */
function flowTypeOf(flow: unknown): string {
  if (typeof flow === "string") return flow;
  if (flow instanceof Flow) return flow.type;
  const f = flow as Partial<Flow> | null;
  if (typeof f === "object" && f !== null && typeof f.declaration === "function" && typeof f.type === "string") return f.type;
  throw new DexError("INVALID_ARGUMENT", "startFlow needs a Flow or the name of a Flow type");
}

/** Whether a Flow declares a timeout handler; undefined for a type name (not known here). */
function timeoutHandlerOf(flow: unknown): boolean | undefined {
  if (typeof flow === "string") return undefined;
  const f = flow as { hasTimeoutHandler?: unknown } | null;
  return typeof f?.hasTimeoutHandler === "boolean" ? f.hasTimeoutHandler : undefined;
}

/**
 * A write's request ID: the one given (a dex name), or a random one (16
 * bytes, hex) when none or "" is given. Made once per call, before its tries.
 */
/**
 * invokeRpc's lockKeys: names, at most 16 (the server merges them with the
 * RPC's declared keys, each once, and refuses more than 16 in all).
 */
function rpcLockKeysOf(keys: unknown): string[] {
  if (keys === undefined) return [];
  if (!Array.isArray(keys)) throw new DexError("INVALID_ARGUMENT", "invokeRpc: lockKeys must be an array of key names");
  if (keys.length > FLOW_LIMITS.lockKeysPerMethod) {
    throw new DexError("INVALID_ARGUMENT", `invokeRpc: lockKeys has ${keys.length} keys; at most ${FLOW_LIMITS.lockKeysPerMethod}`);
  }
  return keys.map((k: unknown, i) => checkName(k, `invokeRpc: lockKeys[${i}]`));
}

function requestIdOf(given: string | undefined, what: string): string {
  if (given === undefined || given === "") return randomBytes(16).toString("hex");
  return checkName(given, `${what}: requestId`);
}

const TIME_TRAVEL_POINT_KEYS = ["beginning", "eventTime", "stepType", "stepExecutionId"] as const;

/**
 * A TimeTravelPoint on the wire, checked first: exactly one form, each with
 * a valid value (the server would refuse an empty Step type or execution,
 * but a point that says two things would be read as one of them).
 */
function timeTravelPointToWire(point: unknown, what: string): WireTimeTravelPoint {
  const forms = "{ beginning: true }, { eventTime }, { stepType, which? } or { stepExecutionId }";
  if (typeof point !== "object" || point === null) {
    throw new DexError("INVALID_ARGUMENT", `${what} must be one of ${forms}, not ${String(point)}`);
  }
  const p = point as Record<string, unknown>;
  const given = TIME_TRAVEL_POINT_KEYS.filter((k) => p[k] !== undefined);
  if (given.length !== 1) {
    throw new DexError(
      "INVALID_ARGUMENT",
      `${what} must have exactly one of ${TIME_TRAVEL_POINT_KEYS.join(", ")} (${given.length === 0 ? "it has none" : `it has ${given.join(", ")}`}): ${forms}`,
    );
  }
  if (p["which"] !== undefined && given[0] !== "stepType") {
    throw new DexError("INVALID_ARGUMENT", `${what}.which goes with stepType only`);
  }
  switch (given[0]) {
    case "beginning":
      if (p["beginning"] !== true) throw new DexError("INVALID_ARGUMENT", `${what}.beginning must be true, not ${String(p["beginning"])}`);
      return { kind: "TIME_TRAVEL_BEGINNING" };
    case "eventTime": {
      const t = p["eventTime"];
      const ms = t instanceof Date ? t.getTime() : t;
      if (typeof ms !== "number" || !Number.isFinite(ms) || ms < 0) {
        throw new DexError("INVALID_ARGUMENT", `${what}.eventTime must be a valid Date or Unix milliseconds, not ${String(t)}`);
      }
      // Records are stamped in whole milliseconds: "at or before" a fraction
      // is at or before its floor.
      return { kind: "TIME_TRAVEL_EVENT_TIME", eventTimeMs: Math.floor(ms) };
    }
    case "stepType": {
      const stepType = stepTypeOf(p["stepType"] as StepRef, `${what}.stepType`);
      const which = p["which"] ?? "latest";
      if (which !== "first" && which !== "latest") {
        throw new DexError("INVALID_ARGUMENT", `${what}.which must be "first" or "latest", not ${String(which)}`);
      }
      return { kind: which === "first" ? "TIME_TRAVEL_FIRST_OF_STEP_TYPE" : "TIME_TRAVEL_LATEST_OF_STEP_TYPE", stepType };
    }
    default:
      return { kind: "TIME_TRAVEL_STEP_EXECUTION", stepExecutionId: checkName(p["stepExecutionId"], `${what}.stepExecutionId`) };
  }
}

function enumValue(value: string, names: Record<string, string>, what: string): string {
  const wire = names[value];
  if (wire === undefined) {
    throw new DexError("INVALID_ARGUMENT", `${what} must be one of ${Object.keys(names).join(", ")}, not ${String(value)}`);
  }
  return wire;
}

function valuePayload(value: unknown, what: string): { data: Buffer } {
  try {
    return toPayload(value ?? null, what) as { data: Buffer };
  } catch (error) {
    throw new DexError("INVALID_ARGUMENT", error instanceof Error ? error.message : String(error));
  }
}

