// The Worker: hosts dex Flows over one WorkerTaskService.PollWorkerTask
// stream at a time (docs/api.md, "The Worker stream") and runs the Flow tasks
// it receives (one attempt of a Step's waitFor or execute, or one RPC
// handler; flow/runner.ts: runFlowTask), at most maxConcurrentTasks at once.
// Every hello declares the hosted Flows.
//
// Semantics of the C++ SDK (src/sdk/worker.h, src/sdk/README.md):
//   - WorkerHello first on every stream; the stream counts once its HelloAck
//     arrives (a standby refuses it with UNAVAILABLE before that);
//   - every final result is kept until its ResultAck; when a new stream is
//     accepted the unacknowledged ones are sent first, whichever address
//     accepted it; accepted: false drops the result (stale) with a warning;
//   - with several addresses, each round asks them all at once for their
//     gRPC health (dex.WorkerTaskService) and tries the one SERVING first,
//     skipping any that does not answer within 1 s while another does (a
//     frozen process); the reconnect backoff (exponential, jittered to
//     [d/2, d], at most 500 ms while a standby answers) comes after a round
//     of refusals, or after an accepted stream broke;
//   - a stream silent for 3 s (the server pings every second) is dead, and a
//     stream without its HelloAck 5 s after it started is given up;
//   - shutdown(): running and queued tasks finish, their results are sent and
//     acknowledged, bounded by shutdownTimeoutMs; tasks that arrive after
//     shutdown() are neither run nor answered until the end, then handed back
//     as retryable failures.
import { hostname } from "node:os";
import * as grpc from "@grpc/grpc-js";

import { effectiveAddresses, validateServerAddresses } from "./addresses";
import { TokenSource } from "./credentials";
import { TlsConfig, type TlsOptions, wantsDiagnosis } from "./tls";
import { DexError, errorFromGrpc, isConnectionFailure } from "./errors";
import { Attribute, Flow, runFlowTask } from "./flow/index";
import { jitter } from "./internal";
import { probeReadiness, READINESS_PROBE_TIMEOUT_MS, type Readiness, searchOrder } from "./readiness";
import {
  channelOptions,
  services,
  type WireFlowTask,
  type WireFlowTaskResult,
  type WireServerMessage,
  type WireWorkerMessage,
} from "./proto";

/** Where the Worker's log lines go. `console` fits. */
export interface Logger {
  debug?(message: string): void;
  info?(message: string): void;
  warn?(message: string): void;
  error?(message: string): void;
}

/** With TlsOptions: tls, caFile, certFile, keyFile, serverName (tls.ts; README.md, "TLS"). */
export interface WorkerOptions extends TlsOptions {
  /**
   * The addresses (host:port) of the processes of one dex node: the active
   * one and its standbys, in any order. Default: [address].
   */
  addresses?: string[];
  /** One address, used when `addresses` is not given. Default "127.0.0.1:8801". */
  address?: string;
  /** Stable across reconnects of one Worker process. Default "<hostname>-<pid>". */
  workerId?: string;
  /** How many attempts run at once, whatever the server sends. Default 16. */
  maxConcurrentTasks?: number;
  /**
   * Reconnect delays double from initial to max; each is jittered to
   * [d/2, d]. With several addresses the delay comes after each full round.
   * Defaults 100 and 1000: a restarted server is served within about a second.
   */
  reconnectBackoffInitialMs?: number;
  reconnectBackoffMaxMs?: number;
  /**
   * After shutdown(): how long to wait for running attempts to finish and
   * their results to be acknowledged. Past it, running attempts see their
   * signal aborted and their results are dropped (the server times those
   * attempts out). Default 30000.
   */
  shutdownTimeoutMs?: number;
  /**
   * Sent as "authorization: Bearer <token>" when a stream opens (a token of
   * the worker role, docs/api.md "Access"). Default: tokenFile's first line
   * (read again at a reconnect when it changed), else $DEX_TOKEN, else the
   * file $DEX_TOKEN_FILE names, else none. run() rejects a file it cannot read.
   */
  token?: string;
  tokenFile?: string;
  /** Default: warnings and errors to console.error. */
  logger?: Logger;
}

/** Counters, for tests and monitoring. */
export interface WorkerStats {
  /** Streams whose hello was sent. */
  streamsOpened: number;
  /** Streams the server accepted (HelloAck received). */
  streamsAccepted: number;
  /** Streams that ended without a HelloAck (a standby, nothing listening, no answer). */
  streamsRefused: number;
  /** FlowTasks received (duplicates excluded). */
  tasksReceived: number;
  /** Attempts that returned or threw. */
  tasksFinished: number;
  resultsAccepted: number;
  /** Results the server refused as stale (dropped). */
  resultsRefused: number;
  /** Results sent again on a new stream. */
  resultsResent: number;
  heartbeatsSent: number;
  /** Attempts running now. */
  running: number;
  /** The address whose process accepted the current stream; "" while searching. */
  connectedAddress: string;
}

/**
 * Flow types one hello may declare: the server refuses more with INVALID_ARGUMENT
 * (kDeclarationsPerHelloMax in src/engine/flow_dispatch.cc; tests/tools/check_limits.py
 * keeps the two equal).
 */
export const FLOW_TYPES_PER_HELLO_MAX = 100;
// Tasks queued beyond the running attempts are bounded; past this a task is
// answered with a retryable failure instead of being queued.
const QUEUED_TASKS_MIN = 1000;
// A stream that received nothing (not even a Ping) for this long is treated as
// dead and cancelled: the process froze (SIGSTOP, a stalled host) or the
// network dropped it, and its standby takes over within the lease. The server
// pings an idle stream every second, so this is three missed pings.
const STREAM_SILENCE_MAX_MS = 3_000;
// From a new stream's start (the connection included) to its HelloAck: past
// this it is given up. A frozen process accepts TCP connections and then says
// nothing; an active one answers at once, a standby refuses at once.
const HELLO_WAIT_MAX_MS = 5_000;
// The longest wait between rounds while a standby answers: the node serves
// again soon (a takeover, the step-down hold-off of 5 s by default).
const STANDBY_RETRY_MAX_MS = 500;
const SUPERVISOR_TICK_MS = 200;
// At the end of a shutdown: how long to wait for the acks of handed-back tasks.
const HAND_BACK_ACK_WAIT_MS = 1_000;

/** Why an attempt's signal was aborted. */
export class TaskCancelledError extends Error {
  /** "cancel-requested" | "attempt-timeout" | "shutdown-timeout" */
  readonly reason: "cancel-requested" | "attempt-timeout" | "shutdown-timeout";
  constructor(reason: TaskCancelledError["reason"], message: string) {
    super(message);
    this.name = "TaskCancelledError";
    this.reason = reason;
  }
}

interface TaskState {
  task: WireFlowTask;
  controller: AbortController;
  timer: NodeJS.Timeout | undefined;
  ended: boolean;
}

interface Connection {
  address: string;
  client: grpc.Client;
  call: grpc.ClientDuplexStream<WireWorkerMessage, WireServerMessage>;
  openedAt: number;
  lastReceive: number;
  accepted: boolean;
  closed: boolean;
}

const defaultLogger: Logger = {
  warn: (message) => console.error(message),
  error: (message) => console.error(message),
};

/** "<hostname>-<pid>": the default worker ID. */
export function defaultWorkerId(): string {
  return `${hostname() || "unknown"}-${process.pid}`;
}

export class Worker {
  readonly workerId: string;
  readonly addresses: readonly string[];
  private readonly maxConcurrent: number;
  private readonly backoffInitialMs: number;
  private readonly backoffMaxMs: number;
  private readonly shutdownTimeoutMs: number;
  private readonly log: Logger;
  private readonly queuedMax: number;
  private readonly token: TokenSource;
  /** Constant after construction: the channels' credentials. */
  private readonly tls: TlsConfig;
  /** The last credential refusal logged, and when: logged again only when it changes or after 30 s. */
  private lastRefusal = "";
  private lastRefusalAt = 0;

  private ran = false;
  private stopping = false;
  private finished = false;
  /** Why the active process refused the hello: run() stops and rejects with it. */
  private refused: DexError | undefined;
  private runPromise: Promise<void> | undefined;
  private current: Connection | undefined;
  private connecting: Connection | undefined;
  private readonly queue: TaskState[] = [];
  private readonly tasks = new Map<string, TaskState>(); // queued or running
  private running = 0;
  private readonly flows = new Map<string, Flow>(); // hosted dex Flows, by Flow type
  // Results, sent or not, until acknowledged.
  private readonly pending = new Map<string, WireWorkerMessage>();
  // Tasks received after shutdown(), neither run nor answered, by task ID.
  private readonly held = new Set<string>();
  private handingBack = false;
  private backoffMs: number;
  private readonly counters: Omit<WorkerStats, "running" | "connectedAddress"> = {
    streamsOpened: 0,
    streamsAccepted: 0,
    streamsRefused: 0,
    tasksReceived: 0,
    tasksFinished: 0,
    resultsAccepted: 0,
    resultsRefused: 0,
    resultsResent: 0,
    heartbeatsSent: 0,
  };
  private connectedAddress = "";
  // Waiters for a change of state (idleness, finished): woken by changed().
  private waiters: (() => void)[] = [];
  private readyResolve: (() => void) | undefined;
  private readyReject: ((error: unknown) => void) | undefined;
  private readonly readyPromise: Promise<void>;

  /** Throws a DexError (INVALID_ARGUMENT) for bad options, naming what is wrong. */
  constructor(options: WorkerOptions = {}) {
    this.addresses = effectiveAddresses(options.addresses, options.address);
    validateServerAddresses(this.addresses);
    this.workerId = options.workerId !== undefined && options.workerId !== "" ? options.workerId : defaultWorkerId();
    this.maxConcurrent = options.maxConcurrentTasks ?? 16;
    if (!Number.isInteger(this.maxConcurrent) || this.maxConcurrent < 1) {
      throw new DexError("INVALID_ARGUMENT", `maxConcurrentTasks must be an integer of at least 1, not ${this.maxConcurrent}`);
    }
    this.backoffInitialMs = options.reconnectBackoffInitialMs ?? 100;
    this.backoffMaxMs = options.reconnectBackoffMaxMs ?? 1_000;
    if (!(this.backoffInitialMs > 0) || !(this.backoffMaxMs >= this.backoffInitialMs)) {
      throw new DexError(
        "INVALID_ARGUMENT",
        "the reconnect backoff needs 0 < reconnectBackoffInitialMs <= reconnectBackoffMaxMs",
      );
    }
    this.shutdownTimeoutMs = options.shutdownTimeoutMs ?? 30_000;
    if (!(this.shutdownTimeoutMs >= 0)) {
      throw new DexError("INVALID_ARGUMENT", "shutdownTimeoutMs must not be negative");
    }
    this.log = options.logger ?? defaultLogger;
    this.token = new TokenSource(options.token, options.tokenFile);
    this.tls = new TlsConfig(options);
    this.queuedMax = Math.max(QUEUED_TASKS_MIN, 4 * this.maxConcurrent);
    this.backoffMs = this.backoffInitialMs;
    this.readyPromise = new Promise<void>((resolve, reject) => {
      this.readyResolve = resolve;
      this.readyReject = reject;
    });
    this.readyPromise.catch(() => undefined); // run() reports the same error
  }

  /**
   * Hosts a dex Flow: declares it in every hello (durably recorded by the
   * server; a changed declaration becomes a new version) and runs its
   * WaitFor, Execute and RPC tasks. Call before run(); a second Flow of the same
   * type replaces the first.
   */
  host(flow: Flow): this {
    if (this.ran) throw new DexError("FAILED_PRECONDITION", "host() must be called before run()");
    if (!(flow instanceof Flow)) throw new DexError("INVALID_ARGUMENT", "host() needs a Flow (new Flow({ type, startStep, steps }))");
    this.flows.set(flow.type, flow);
    return this;
  }

  /**
   * Serves until shutdown(); resolves once the shutdown completed. Rejects
   * with a DexError when it hosts no Flow or more than FLOW_TYPES_PER_HELLO_MAX
   * (100), or Flows that give one index key two index types, when called
   * twice, or when the active process refuses the hello
   * (INVALID_ARGUMENT with the server's reason: a declaration or option it
   * does not accept; the Worker stops as after shutdown()).
   */
  run(): Promise<void> {
    if (this.ran) return Promise.reject(new DexError("FAILED_PRECONDITION", "Worker.run() may be called once"));
    if (this.flows.size === 0) {
      return Promise.reject(new DexError("INVALID_ARGUMENT", "the worker hosts no Flow: call host(flow) before run()"));
    }
    if (this.flows.size > FLOW_TYPES_PER_HELLO_MAX) {
      return Promise.reject(
        new DexError("INVALID_ARGUMENT", `the worker hosts ${this.flows.size} Flow types; a hello takes at most ${FLOW_TYPES_PER_HELLO_MAX}`),
      );
    }
    const clash = indexKeyClash(this.flows.values());
    if (clash !== undefined) return Promise.reject(new DexError("INVALID_ARGUMENT", clash));
    try {
      this.token.get(); // a token file that cannot be read: refused now, naming it
    } catch (error) {
      return Promise.reject(error);
    }
    this.ran = true;
    this.runPromise = this.serve();
    return this.runPromise;
  }

  /**
   * Graceful: stops taking tasks, lets running and queued attempts finish,
   * sends their results and waits for their acks, bounded by shutdownTimeoutMs.
   * Resolves when run() has returned (at once if run() was never called).
   * Idempotent.
   */
  shutdown(): Promise<void> {
    if (!this.stopping) {
      this.stopping = true;
      if (this.ran) {
        this.log.info?.(`worker ${this.workerId}: shutting down`);
        void this.shutdownSequence();
      } else {
        this.finished = true;
        this.readyReject?.(new DexError("CANCELLED", `worker ${this.workerId} was shut down before run()`));
      }
      this.changed();
    }
    return this.runPromise === undefined ? Promise.resolve() : this.runPromise.then(() => undefined, () => undefined);
  }

  /**
   * Resolves once a process accepted the task stream, and with it the hello
   * that declared the hosted Flows: runs started from then on find their Flow
   * types and this Worker. Rejects when run() fails, or when the Worker stops
   * first.
   */
  ready(): Promise<void> {
    return this.readyPromise;
  }

  stats(): WorkerStats {
    return { ...this.counters, running: this.running, connectedAddress: this.connectedAddress };
  }

  // ------------------------------------------------------------------ serving

  private async serve(): Promise<void> {
    const supervisor = setInterval(() => this.supervise(), SUPERVISOR_TICK_MS);
    try {
      this.log.info?.(
        `worker ${this.workerId}: serving ${[...this.flows.keys()].map((f) => `Flow ${f}`).join(", ")} on ${this.addresses.join(
          ", ",
        )} with up to ${this.maxConcurrent} concurrent tasks`,
      );
      const n = this.addresses.length;
      let first = 0; // where the rotation starts: the address accepted last
      while (!this.finished) {
        const roundStart = Date.now();
        // With several addresses, ask them all at once which one is active, so
        // that the round neither starts at a standby nor waits on a frozen process.
        let order = [0];
        let readiness: Readiness[] = [];
        if (n > 1) {
          readiness = await probeReadiness(this.addresses, "dex.WorkerTaskService", undefined, this.tls.forChannel());
          order = searchOrder(readiness, first);
        }
        // A process said it is not the active one: a standby, so the node is
        // changing hands and serves again soon.
        let standbyInRound = readiness.includes("notServing");
        let accepted = false;
        for (const i of order) {
          if (this.finished) break;
          const outcome = await this.serveStream(this.addresses[i] as string);
          accepted = outcome.accepted;
          standbyInRound ||= outcome.refusedByStandby;
          if (accepted) {
            first = i;
            break;
          }
        }
        if (this.finished) break;
        // The active process went away, or only the connection broke: search
        // again after the initial backoff.
        if (accepted) this.backoffMs = this.backoffInitialMs;
        let delay = jitter(this.backoffMs);
        this.backoffMs = Math.min(this.backoffMs * 2, this.backoffMaxMs);
        // Polling a standby is one cheap refusal: keep the wait short rather
        // than let the backoff grow past the moment the node serves again; the
        // round's own time (a probe that waited on a silent address) counts.
        if (!accepted && standbyInRound) {
          delay = Math.max(0, Math.min(delay, STANDBY_RETRY_MAX_MS) - (Date.now() - roundStart));
          // A node that answered is about to serve: the listener swap at its
          // role change refuses connections for a moment, and that refusal
          // must not wait out a backoff grown during the standby's refusals.
          this.backoffMs = Math.min(this.backoffMs, STANDBY_RETRY_MAX_MS);
        }
        if (n === 1) {
          this.log.info?.(
            `worker ${this.workerId}: reconnecting to ${this.addresses[0] as string} in ${Math.round(delay)} ms`,
          );
        } else if (accepted) {
          this.log.info?.(`worker ${this.workerId}: looking for the active process in ${Math.round(delay)} ms`);
        } else {
          const silent = this.addresses.filter((_, i) => readiness[i] === "noAnswer");
          this.log.info?.(
            `worker ${this.workerId}: none of the ${n} addresses accepted the task stream${
              silent.length === 0
                ? ""
                : ` (no answer within ${READINESS_PROBE_TIMEOUT_MS} ms from ${silent.join(", ")})`
            }; trying them again in ${Math.round(delay)} ms`,
          );
        }
        await this.sleepUnlessFinished(delay);
      }
      this.log.info?.(`worker ${this.workerId}: stopped`);
      if (this.refused !== undefined) throw this.refused;
    } catch (error) {
      this.readyReject?.(error);
      throw error;
    } finally {
      clearInterval(supervisor);
      // A run() that failed leaves nothing running.
      this.finished = true;
      this.readyReject?.(new DexError("CANCELLED", `worker ${this.workerId} stopped before it was ready`));
      this.changed();
    }
  }

  /**
   * Opens one stream to `address` and serves it until it ends. Resolves
   * whether it was accepted, and whether a process refused it as a standby.
   */
  private serveStream(address: string): Promise<{ accepted: boolean; refusedByStandby: boolean }> {
    const { WorkerTaskService } = services();
    // The TLS files as they are now: a rotated certificate is used (tls.ts).
    const { credentials, options } = this.tls.forChannel();
    const client = new WorkerTaskService(
      address,
      credentials,
      // A fresh channel each time: whichever process answers at the address now.
      { ...channelOptions(this.backoffInitialMs, this.backoffMaxMs), ...options },
    );
    // The token as it is now: a rotated token file is read again (credentials.ts).
    const metadata = new grpc.Metadata();
    const token = this.token.get();
    if (token !== undefined && token !== "") metadata.set("authorization", `Bearer ${token}`);
    const call = (
      client as unknown as {
        PollWorkerTask(metadata: grpc.Metadata): grpc.ClientDuplexStream<WireWorkerMessage, WireServerMessage>;
      }
    ).PollWorkerTask(metadata);
    const now = Date.now();
    const conn: Connection = { address, client, call, openedAt: now, lastReceive: now, accepted: false, closed: false };

    return new Promise<{ accepted: boolean; refusedByStandby: boolean }>((resolve) => {
      let ended = false;
      let endStatus: { code?: number; details?: string } | undefined;
      const end = (status?: { code?: number; details?: string }): void => {
        if (status !== undefined && endStatus === undefined) endStatus = status;
        if (ended) return;
        ended = true;
        if (this.current === conn) {
          this.current = undefined;
          this.connectedAddress = "";
        }
        if (this.connecting === conn) this.connecting = undefined;
        if (!conn.accepted) this.counters.streamsRefused++;
        this.closeConnection(conn);
        if (!this.finished && endStatus?.code === grpc.status.INVALID_ARGUMENT && this.refused === undefined) {
          // The server ends a stream with INVALID_ARGUMENT only for its hello
          // (a Flow declaration it refuses, a worker ID or concurrency over a
          // limit): retrying cannot help, so the Worker stops.
          this.refused = new DexError(
            "INVALID_ARGUMENT",
            `${address} refused this Worker: ${endStatus.details ?? ""} (the Worker stops: fix the Flows it hosts or its options)`,
          );
          this.log.error?.(`worker ${this.workerId}: ${this.refused.message}`);
          void this.shutdown();
        } else if (
          !this.finished &&
          (endStatus?.code === grpc.status.UNAUTHENTICATED || endStatus?.code === grpc.status.PERMISSION_DENIED)
        ) {
          // The server refused the credential: keep trying (a rotated token
          // file may fix it), and say so as an error now and then.
          const why = errorFromGrpc(endStatus, address, 0).message;
          if (why !== this.lastRefusal || Date.now() - this.lastRefusalAt >= 30_000) {
            this.lastRefusal = why;
            this.lastRefusalAt = Date.now();
            this.log.error?.(
              `worker ${this.workerId}: ${address} refused this Worker's credential: ${why} (give WorkerOptions.token or tokenFile, $DEX_TOKEN or $DEX_TOKEN_FILE a token of the worker role; retrying)`,
            );
          }
        } else if (!this.finished) {
          const why =
            endStatus === undefined || endStatus.code === grpc.status.OK
              ? "the server closed the stream"
              : errorFromGrpc(endStatus, address, 0).message;
          if (conn.accepted) this.log.warn?.(`worker ${this.workerId}: task stream ended: ${why}`);
          else this.log.info?.(`worker ${this.workerId}: ${address} did not accept the task stream: ${why}`);
        }
        if (
          !this.finished &&
          !conn.accepted &&
          endStatus?.code === grpc.status.UNAVAILABLE &&
          wantsDiagnosis(endStatus.details ?? "", this.tls.enabled)
        ) {
          // grpc-js's "Failed to connect" does not say why; a refused TLS
          // handshake is found by one more connection, logged once per address
          // every 30 s (tls.ts).
          void this.tls.diagnose(address, 1_000).then(({ why, fresh }) => {
            if (fresh && why !== "") this.log.error?.(`worker ${this.workerId}: the connection to ${address} failed: ${why}`);
          });
        }
        this.changed();
        // A process answered UNAVAILABLE in its own words (not gRPC's for a
        // connection that failed): a standby.
        const refusedByStandby =
          !conn.accepted &&
          endStatus?.code === grpc.status.UNAVAILABLE &&
          !isConnectionFailure(endStatus.details ?? "");
        resolve({ accepted: conn.accepted, refusedByStandby });
      };
      call.on("data", (message: WireServerMessage) => this.onMessage(conn, message));
      call.on("error", (error: grpc.ServiceError) => end(error));
      call.on("status", (status: grpc.StatusObject) => end(status));
      call.on("end", () => {
        // The server half-closed: the status follows; bound the wait for it.
        setTimeout(() => end(), 1000).unref();
      });

      const hello: WireWorkerMessage = {
        hello: {
          workerId: this.workerId,
          maxConcurrentTasks: this.maxConcurrent,
          flows: [...this.flows.values()].map((f) => f.declaration()),
        },
      };
      call.write(hello);
      this.counters.streamsOpened++;
      if (this.finished) this.closeConnection(conn);
      else this.connecting = conn; // the supervisor bounds the wait for the HelloAck
    });
  }

  private closeConnection(conn: Connection): void {
    if (conn.closed) return;
    conn.closed = true;
    conn.call.cancel();
    conn.client.close();
  }

  private write(conn: Connection | undefined, message: WireWorkerMessage): boolean {
    if (conn === undefined || conn.closed) return false;
    try {
      conn.call.write(message);
      return true;
    } catch {
      return false;
    }
  }

  private onMessage(conn: Connection, message: WireServerMessage): void {
    if (conn.closed) return;
    conn.lastReceive = Date.now();
    switch (message.kind) {
      case "helloAck": {
        if (conn.accepted) return;
        conn.accepted = true;
        if (this.connecting === conn) this.connecting = undefined;
        if (this.finished) {
          this.closeConnection(conn);
          return;
        }
        // Results go to this stream only once the process accepted it: a
        // standby's refusal loses nothing, and the unacknowledged ones go first.
        this.current = conn;
        this.counters.streamsAccepted++;
        this.readyResolve?.();
        this.connectedAddress = conn.address;
        const resend = [...this.pending.values()];
        this.counters.resultsResent += resend.length;
        const ack = message.helloAck;
        this.log.info?.(
          `worker ${this.workerId}: connected to ${conn.address} (node ${ack?.nodeId ?? "?"}, epoch ${
            ack?.nodeEpoch ?? "?"
          })${resend.length === 0 ? "" : `; re-sending ${resend.length} unacknowledged result(s)`}`,
        );
        for (const result of resend) {
          if (!this.write(conn, result)) break;
        }
        this.changed();
        return;
      }
      case "flowTask":
        if (message.flowTask !== undefined) this.onFlowTask(message.flowTask);
        return;
      case "ping":
        return;
      case "resultAck": {
        const ack = message.resultAck;
        if (ack === undefined || !this.pending.has(ack.taskId)) {
          this.log.debug?.(`worker ${this.workerId}: ack for task ${ack?.taskId ?? "?"} with no pending result`);
          return;
        }
        this.pending.delete(ack.taskId);
        if (ack.accepted) {
          this.counters.resultsAccepted++;
        } else {
          this.counters.resultsRefused++;
          // A stale result is expected after a takeover (recovery ended the
          // attempt and runs it again): information, not a problem to look into.
          const stale = ack.reason.startsWith("stale");
          (stale ? this.log.info : this.log.warn)?.call(
            this.log,
            `worker ${this.workerId}: the result of task ${ack.taskId} was refused and is dropped: ${
              ack.reason === "" ? "(no reason given)" : ack.reason
            }`,
          );
        }
        this.changed();
        return;
      }
      case "heartbeatAck": {
        const ack = message.heartbeatAck;
        if (ack === undefined || !ack.cancelRequested) return;
        const state = this.tasks.get(ack.taskId);
        if (state !== undefined && !state.controller.signal.aborted) {
          state.controller.abort(
            new TaskCancelledError(
              "cancel-requested",
              `the server asked to stop task ${ack.taskId}: its attempt ended or its run was stopped`,
            ),
          );
        }
        return;
      }
      default:
        this.log.warn?.(`worker ${this.workerId}: ignoring a server message of unknown kind ${String(message.kind)}`);
    }
  }

  private onFlowTask(task: WireFlowTask): void {
    const id = task.taskId;
    if (this.tasks.has(id) || this.pending.has(id) || this.held.has(id)) {
      this.log.debug?.(`worker ${this.workerId}: task ${id} received again; ignored`);
      return;
    }
    this.counters.tasksReceived++;
    if (this.stopping) {
      // Not started, and not answered yet: an answer would free the stream's
      // capacity on the server, which would send the next task at once, and
      // each refusal costs the Step an attempt. Handed back at the end.
      if (this.handingBack) {
        this.log.warn?.(
          `worker ${this.workerId}: task ${id} arrived while the worker hands tasks back; ignored (the server times it out)`,
        );
      } else {
        this.held.add(id);
      }
      return;
    }
    if (this.queue.length >= this.queuedMax) {
      const message = `worker ${this.workerId} has ${this.queue.length} tasks queued; the task was not started`;
      this.log.warn?.(`worker ${this.workerId}: ${message}`);
      this.deliver(id, { flowResult: { taskId: id, error: { message, nonRetryable: false } } });
      return;
    }
    const state: TaskState = { task, controller: new AbortController(), timer: undefined, ended: false };
    if (task.attemptTimeoutMs > 0) {
      state.timer = setTimeout(() => {
        state.controller.abort(
          new TaskCancelledError("attempt-timeout", `task ${id} passed its attempt timeout of ${task.attemptTimeoutMs} ms`),
        );
      }, task.attemptTimeoutMs);
      state.timer.unref();
    }
    this.tasks.set(id, state);
    this.queue.push(state);
    this.pump();
  }

  /** Starts queued tasks while fewer than maxConcurrentTasks run. */
  private pump(): void {
    while (this.running < this.maxConcurrent && this.queue.length > 0 && !this.finished) {
      const state = this.queue.shift() as TaskState;
      this.running++;
      void this.runTask(state);
    }
  }

  private async runTask(state: TaskState): Promise<void> {
    const result: WireWorkerMessage = { flowResult: await this.runFlow(state) };
    const taskId = state.task.taskId;
    state.ended = true;
    if (state.timer !== undefined) clearTimeout(state.timer);
    this.tasks.delete(taskId);
    this.running--;
    this.counters.tasksFinished++;
    if (this.finished) {
      this.log.warn?.(
        `worker ${this.workerId}: task ${taskId} finished after the shutdown timeout; its result is dropped`,
      );
    } else {
      this.deliver(taskId, result);
    }
    this.changed();
    this.pump();
  }

  private async runFlow(state: TaskState): Promise<WireFlowTaskResult> {
    const task = state.task;
    const flow = this.flows.get(task.flowType);
    if (flow === undefined) {
      return { taskId: task.taskId, error: { message: `worker ${this.workerId} hosts no Flow type '${task.flowType}'`, nonRetryable: false } };
    }
    return runFlowTask(flow, task, state.controller.signal, () => this.sendHeartbeat(state));
  }

  private sendHeartbeat(state: TaskState): boolean {
    if (state.ended) return false;
    const conn = this.current;
    if (conn === undefined) return false;
    this.counters.heartbeatsSent++;
    return this.write(conn, { heartbeat: { taskId: state.task.taskId, details: "" } });
  }

  /** Keeps `result` until acknowledged and writes it to the current stream, if any. */
  private deliver(taskId: string, result: WireWorkerMessage): void {
    this.pending.set(taskId, result);
    this.write(this.current, result); // otherwise sent when the next stream is accepted
  }

  /** Every 200 ms: give up a stream that says nothing. */
  private supervise(): void {
    const now = Date.now();
    const connecting = this.connecting;
    if (connecting !== undefined && now - connecting.openedAt > HELLO_WAIT_MAX_MS) {
      this.log.warn?.(
        `worker ${this.workerId}: no answer to the hello from ${connecting.address} within ${
          HELLO_WAIT_MAX_MS / 1000
        } s (set-up included); giving up on it`,
      );
      this.connecting = undefined;
      this.closeConnection(connecting);
    }
    const current = this.current;
    if (current !== undefined && now - current.lastReceive > STREAM_SILENCE_MAX_MS) {
      this.log.warn?.(`worker ${this.workerId}: nothing received for ${STREAM_SILENCE_MAX_MS / 1000} s; reconnecting`);
      this.current = undefined;
      this.closeConnection(current);
    }
  }

  private idle(): boolean {
    return this.queue.length === 0 && this.running === 0 && this.pending.size === 0;
  }

  private async shutdownSequence(): Promise<void> {
    // Wait until idle (every task finished, every result acknowledged) or the bound passes.
    const idle = await this.waitFor(() => this.idle() || this.finished, this.shutdownTimeoutMs);
    if (!idle) {
      this.log.warn?.(
        `worker ${this.workerId}: shutdown timeout passed with ${this.running} task(s) running, ${this.queue.length} queued and ${this.pending.size} result(s) unacknowledged; giving up on them`,
      );
    }
    // Hand back the tasks that arrived after shutdown() as retryable
    // failures, so the server dispatches them again after the Step's retry
    // interval instead of waiting for their start-to-close timeout.
    if (this.held.size > 0 && !this.finished) {
      this.handingBack = true;
      this.log.info?.(`worker ${this.workerId}: handing back ${this.held.size} task(s) that arrived after shutdown`);
      for (const id of this.held) {
        const error = { message: `worker ${this.workerId} is shutting down; the task was not started`, nonRetryable: false };
        this.deliver(id, { flowResult: { taskId: id, error } });
      }
      this.held.clear();
      await this.waitFor(() => this.pending.size === 0 || this.finished, HAND_BACK_ACK_WAIT_MS);
    }
    this.finished = true;
    for (const state of this.tasks.values()) {
      if (!state.controller.signal.aborted) {
        state.controller.abort(
          new TaskCancelledError(
            "shutdown-timeout",
            `worker ${this.workerId} passed its shutdown timeout of ${this.shutdownTimeoutMs} ms`,
          ),
        );
      }
    }
    for (const state of this.queue) {
      if (state.timer !== undefined) clearTimeout(state.timer);
      this.tasks.delete(state.task.taskId);
    }
    this.queue.length = 0;
    const current = this.current;
    const connecting = this.connecting;
    this.current = undefined;
    this.connecting = undefined;
    this.connectedAddress = "";
    if (current !== undefined) this.closeConnection(current);
    if (connecting !== undefined) this.closeConnection(connecting);
    this.changed();
  }

  // ------------------------------------------------------------- waiting

  private changed(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }

  /** Resolves true once `predicate` holds (checked on every change), false after `ms`. */
  private waitFor(predicate: () => boolean, ms: number): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      if (predicate()) {
        resolve(true);
        return;
      }
      let done = false;
      const timer = setTimeout(() => {
        done = true;
        resolve(predicate());
      }, ms);
      const check = (): void => {
        if (done) return;
        if (predicate()) {
          done = true;
          clearTimeout(timer);
          resolve(true);
        } else {
          this.waiters.push(check);
        }
      };
      this.waiters.push(check);
    });
  }

  private async sleepUnlessFinished(ms: number): Promise<void> {
    await this.waitFor(() => this.finished, ms);
  }
}

/**
 * Why one hello could not declare these Flows together: two of them give one
 * index key two index types (the server refuses such a hello too, and a
 * declaration that disagrees with the live one of a Flow type another Worker
 * declared). undefined when they agree.
 */
function indexKeyClash(flows: Iterable<Flow>): string | undefined {
  const seen = new Map<string, { type: string; flowType: string }>();
  for (const flow of flows) {
    for (const a of flow.attributes.values()) {
      if (!(a instanceof Attribute) || a.index === undefined) continue;
      const first = seen.get(a.index.key);
      if (first === undefined) seen.set(a.index.key, { type: a.index.type, flowType: flow.type });
      else if (first.type !== a.index.type && first.flowType !== flow.type) {
        return (
          `index key '${a.index.key}' is ${first.type} in Flow type '${first.flowType}'; ` +
          `Flow type '${flow.type}' declares it ${a.index.type} (index keys are shared by every Flow type)`
        );
      }
    }
  }
  return undefined;
}
