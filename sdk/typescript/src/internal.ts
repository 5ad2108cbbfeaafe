// Internal helpers: abortable sleeps, channel connectivity waits, unary calls
// as promises, jitter.
import * as grpc from "@grpc/grpc-js";

/** The reason a signal was aborted with, as something to throw. */
export function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("This operation was aborted", "AbortError");
}

/** Resolves after `ms`, or rejects with the signal's reason once it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(abortReason(signal));
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(abortReason(signal as AbortSignal));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, Math.max(0, ms));
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** `promise`, or a rejection with the signal's reason if it aborts first. */
export function abortable<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return promise;
  if (signal.aborted) return Promise.reject(abortReason(signal));
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(abortReason(signal));
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}

/** A random duration in [d/2, d]. */
export function jitter(ms: number): number {
  return ms / 2 + Math.random() * (ms / 2);
}

/**
 * Waits until the channel is READY, TRANSIENT_FAILURE or SHUTDOWN, or `until`
 * (a Date.now() value) passes; then it returns the state it is in (IDLE or
 * CONNECTING when the wait ran out).
 */
export async function waitForConnection(
  channel: ReturnType<grpc.Client["getChannel"]>,
  until: number,
): Promise<grpc.connectivityState> {
  const { IDLE, CONNECTING } = grpc.connectivityState;
  let state = channel.getConnectivityState(true);
  while (state === IDLE || state === CONNECTING) {
    if (Date.now() >= until) return state;
    const current = state;
    const changed = await new Promise<boolean>((resolve) => {
      channel.watchConnectivityState(current, until, (error?: Error) => resolve(error === undefined));
    });
    state = channel.getConnectivityState(true);
    if (!changed) return state;
  }
  return state;
}

type UnaryMethod = (
  request: unknown,
  metadata: grpc.Metadata,
  options: grpc.CallOptions,
  callback: (error: grpc.ServiceError | null, response?: unknown) => void,
) => grpc.ClientUnaryCall;

/**
 * One unary call as a promise: rejects with the grpc ServiceError, or with
 * the signal's reason when it aborts (the call is cancelled then).
 */
export function unaryCall<Response>(
  client: grpc.Client,
  method: string,
  request: unknown,
  deadline: number,
  metadata: grpc.Metadata,
  signal: AbortSignal | undefined,
): Promise<Response> {
  return new Promise<Response>((resolve, reject) => {
    if (signal?.aborted) {
      reject(abortReason(signal));
      return;
    }
    const fn = (client as unknown as Record<string, UnaryMethod | undefined>)[method];
    if (fn === undefined) throw new Error(`dex-sdk: the API has no method ${method}`);
    let onAbort: (() => void) | undefined;
    const call = fn.call(client, request, metadata, { deadline: new Date(deadline) }, (error, response) => {
      if (onAbort !== undefined) signal?.removeEventListener("abort", onAbort);
      if (signal?.aborted) reject(abortReason(signal));
      else if (error !== null) reject(error);
      else resolve(response as Response);
    });
    if (signal !== undefined) {
      onAbort = () => call.cancel();
      signal.addEventListener("abort", onAbort, { once: true });
    }
  });
}

/** Whether `x` looks like a grpc ServiceError (has a numeric code). */
export function isServiceError(x: unknown): x is grpc.ServiceError {
  return typeof x === "object" && x !== null && typeof (x as { code?: unknown }).code === "number";
}
