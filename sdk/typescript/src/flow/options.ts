// StepOptions: the attempt timeout, retry policy, durability, heartbeat
// timeout, lock keys and failure policy of a Step's two methods, merged and
// encoded as the wire's StepOptions.
import type { WireMethodOptions, WireStepOptions } from "../proto";
import { checkCount, checkDuration, checkName, FLOW_LIMITS, invalid, stepTypeOf, type StepRef } from "./checks";

export interface RetryOptions {
  /** The first backoff. Default 1000. */
  initialIntervalMs?: number;
  /** Each later backoff is multiplied by this (>= 1). Default 2. */
  backoffCoefficient?: number;
  /** Backoffs are capped at this. Default 100 x the initial interval. */
  maximumIntervalMs?: number;
  /** Attempts in all, the first included. Default 3; 0: no limit. */
  maximumAttempts?: number;
  /** No retry starts later than this after the first attempt. Default: no limit. */
  totalDurationMs?: number;
}

export interface MethodOptions {
  /** One attempt's limit. Default 60000. */
  attemptTimeoutMs?: number;
  retry?: RetryOptions;
  /** "sync" (default): the attempt's start is durable before a Worker gets it; "async": sent while it is written. */
  durability?: "sync" | "async";
  /** The attempt must heartbeat at least this often. Default: no heartbeat needed. */
  heartbeatTimeoutMs?: number;
  /**
   * Per run: no attempt of this method is handed out while another attempt
   * (or RPC) of the same run holds one of these keys; waiters get them in
   * the order they queued. Held from the attempt's queueing until it ends.
   */
  lockKeys?: string[];
}

export interface WaitForOptions extends MethodOptions {
  /** Once WaitFor's retries are used up, run execute anyway (it sees ctx.waitForFailed). Default false: fail the Flow. */
  proceedToExecute?: boolean;
}

export interface ExecuteOptions extends MethodOptions {
  /** Once execute's retries are used up, start this Step with the same input (it sees ctx.recoveryError). Default: fail the Flow. */
  recoveryStep?: StepRef;
}

/** The options of a Step's two methods; unset fields take the server's defaults (docs/flow-rules.md, "Defaults"). */
export interface StepOptions {
  waitFor?: WaitForOptions;
  execute?: ExecuteOptions;
}

/** `over` on top of `base`, field by field (retry too). */
export function mergeStepOptions(base: StepOptions | undefined, over: StepOptions | undefined): StepOptions {
  const method = <M extends MethodOptions>(b: M | undefined, o: M | undefined): M | undefined => {
    if (b === undefined) return o;
    if (o === undefined) return b;
    const retry = b.retry === undefined || o.retry === undefined ? (o.retry ?? b.retry) : { ...b.retry, ...o.retry };
    return { ...b, ...o, ...(retry === undefined ? {} : { retry }) };
  };
  const out: StepOptions = {};
  const waitFor = method(base?.waitFor, over?.waitFor);
  const execute = method(base?.execute, over?.execute);
  if (waitFor !== undefined) out.waitFor = waitFor;
  if (execute !== undefined) out.execute = execute;
  return out;
}

export function retryToWire(r: RetryOptions, what: string): NonNullable<WireMethodOptions["retry"]> {
  const retry: NonNullable<WireMethodOptions["retry"]> = {};
  if (r.initialIntervalMs !== undefined) retry.initialIntervalMs = checkDuration(r.initialIntervalMs, `${what}.initialIntervalMs`);
  if (r.maximumIntervalMs !== undefined) retry.maximumIntervalMs = checkDuration(r.maximumIntervalMs, `${what}.maximumIntervalMs`);
  if (r.totalDurationMs !== undefined) retry.totalDurationMs = checkDuration(r.totalDurationMs, `${what}.totalDurationMs`);
  if (r.maximumAttempts !== undefined) retry.maximumAttempts = checkCount(r.maximumAttempts, `${what}.maximumAttempts`);
  if (r.backoffCoefficient !== undefined) {
    if (!(typeof r.backoffCoefficient === "number" && r.backoffCoefficient >= 1)) {
      throw invalid(`${what}.backoffCoefficient must be a number >= 1, not ${String(r.backoffCoefficient)}`);
    }
    retry.backoffCoefficient = r.backoffCoefficient;
  }
  return retry;
}

/** Lock keys, checked: each a name, none twice. */
export function checkLockKeys(keys: unknown, what: string): string[] {
  if (!Array.isArray(keys)) throw invalid(`${what} must be an array of key names`);
  if (keys.length > FLOW_LIMITS.lockKeysPerMethod) {
    throw invalid(`${what} has ${keys.length} keys; the limit is ${FLOW_LIMITS.lockKeysPerMethod}`);
  }
  const seen = new Set<string>();
  for (const [i, k] of keys.entries()) {
    checkName(k, `${what}[${i}]`);
    if (seen.has(k as string)) throw invalid(`${what} lists '${String(k)}' twice`);
    seen.add(k as string);
  }
  return [...(keys as string[])];
}

function methodOptionsToWire(m: WaitForOptions & ExecuteOptions, what: string): WireMethodOptions {
  const wire: WireMethodOptions = {};
  if (m.attemptTimeoutMs !== undefined) wire.attemptTimeoutMs = checkDuration(m.attemptTimeoutMs, `${what}.attemptTimeoutMs`);
  if (m.heartbeatTimeoutMs !== undefined) {
    wire.heartbeatTimeoutMs = checkDuration(m.heartbeatTimeoutMs, `${what}.heartbeatTimeoutMs`);
  }
  if (m.durability !== undefined) {
    if (m.durability !== "sync" && m.durability !== "async") {
      throw invalid(`${what}.durability must be "sync" or "async", not ${String(m.durability)}`);
    }
    wire.durability = m.durability === "async" ? "ASYNC" : "SYNC";
  }
  if (m.retry !== undefined) wire.retry = retryToWire(m.retry, `${what}.retry`);
  if (m.lockKeys !== undefined) wire.lockKeys = checkLockKeys(m.lockKeys, `${what}.lockKeys`);
  if (m.proceedToExecute === true) wire.failurePolicy = "PROCEED_TO_EXECUTE";
  if (m.recoveryStep !== undefined) {
    wire.failurePolicy = "PROCEED_TO_STEP";
    wire.recoveryStepType = stepTypeOf(m.recoveryStep, `${what}.recoveryStep`);
  }
  return wire;
}

/** StepOptions as the wire's StepOptions. Throws a DexError (INVALID_ARGUMENT) naming a bad field. */
export function stepOptionsToWire(options: StepOptions, what = "StepOptions"): WireStepOptions {
  const wire: WireStepOptions = {};
  if (options.waitFor !== undefined) {
    if ((options.waitFor as ExecuteOptions).recoveryStep !== undefined) {
      throw invalid(`${what}.waitFor cannot have a recoveryStep (that is an execute option)`);
    }
    wire.waitFor = methodOptionsToWire(options.waitFor, `${what}.waitFor`);
  }
  if (options.execute !== undefined) {
    if ((options.execute as WaitForOptions).proceedToExecute !== undefined) {
      throw invalid(`${what}.execute cannot have proceedToExecute (that is a waitFor option)`);
    }
    wire.execute = methodOptionsToWire(options.execute, `${what}.execute`);
  }
  return wire;
}
