// Sends one action's write: a fresh request ID for each new send, and the same ID again when the
// user retries a send whose answer never came (a network failure, no active process, a timeout),
// so that a write that did happen is not done twice (the server remembers the ID).
import { useCallback, useRef, useState } from "react";
import { ApiError } from "../../../api/client";
import { newRequestId } from "./encode";

export interface Action<T> {
  busy: boolean;
  error: unknown;
  /** The last send's answer was lost: retry() sends it again with its request ID. */
  canRetry: boolean;
  requestId: string;
  /**
   * Sends a new request (a fresh request ID); `then` gets the result once it succeeds (also after
   * a retry). Answers the result, or undefined on an error.
   */
  send: (fn: (requestId: string) => Promise<T>, then?: (result: T) => void) => Promise<T | undefined>;
  retry: () => Promise<T | undefined>;
  /** Forgets the error (the user changed the form or closed the modal). */
  reset: () => void;
}

/** An error after which the write may or may not have happened. */
export function isUncertain(e: unknown): boolean {
  if (!(e instanceof ApiError)) return false;
  return e.code === "UNREACHABLE" || e.code === "UNAVAILABLE" || e.code === "DEADLINE_EXCEEDED" || e.httpStatus >= 500;
}

export function useAction<T>(): Action<T> {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const [canRetry, setCanRetry] = useState(false);
  const [requestId, setRequestId] = useState("");
  const last = useRef<{ id: string; fn: (requestId: string) => Promise<T>; then?: (result: T) => void } | null>(null);

  const exec = useCallback(async (): Promise<T | undefined> => {
    const req = last.current;
    if (!req) return undefined;
    setBusy(true);
    setError(undefined);
    setCanRetry(false);
    setRequestId(req.id);
    try {
      const r = await req.fn(req.id);
      last.current = null;
      req.then?.(r);
      return r;
    } catch (e) {
      setError(e);
      if (isUncertain(e)) setCanRetry(true);
      else last.current = null;
      return undefined;
    } finally {
      setBusy(false);
    }
  }, []);

  const send = useCallback(
    (fn: (requestId: string) => Promise<T>, then?: (result: T) => void) => {
      last.current = { id: newRequestId(), fn, then };
      return exec();
    },
    [exec],
  );

  const reset = useCallback(() => {
    last.current = null;
    setError(undefined);
    setCanRetry(false);
  }, []);

  return { busy, error, canRetry, requestId, send, retry: exec, reset };
}
