// How waitFor and execute fail an attempt on purpose, and how any error
// becomes the text of a failed attempt.

export interface TaskErrorOptions {
  /** No further attempt: the method's failure policy applies at once. Default false. */
  nonRetryable?: boolean;
  /**
   * The delay before the next attempt, in place of the retry policy's backoff
   * (what a rate-limited service asked for, say): whole milliseconds, at most
   * 30 days. The policy's attempts and total duration still bound the retries.
   */
  retryAfterMs?: number;
  cause?: unknown;
}

const RETRY_AFTER_MAX_MS = 30 * 24 * 3600 * 1000;

/**
 * Thrown by waitFor or execute to fail the attempt with `message`. A
 * retryable failure consumes an attempt and the method is retried per its
 * retry policy; a non-retryable one ends the retries at once (the failure
 * policy applies: fail the Flow, proceed to Execute, or a recovery Step).
 * Anything else thrown is a retryable failure with the error's message.
 */
export class TaskError extends Error {
  readonly nonRetryable: boolean;
  readonly retryAfterMs: number | undefined;
  constructor(message: string, options: TaskErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "TaskError";
    this.nonRetryable = options.nonRetryable ?? false;
    const after = options.retryAfterMs;
    if (after !== undefined && !(Number.isInteger(after) && after >= 0 && after <= RETRY_AFTER_MAX_MS)) {
      throw new RangeError(`TaskError: retryAfterMs must be whole milliseconds from 0 to ${RETRY_AFTER_MAX_MS} (30 days), not ${String(after)}`);
    }
    this.retryAfterMs = after;
  }
}

/** An error's message, prefixed by its class unless it is a plain Error or a TaskError. */
export function describeError(error: unknown): string {
  if (error instanceof Error) {
    return error.name === "Error" || error.name === "" || error.name === "TaskError"
      ? error.message
      : `${error.name}: ${error.message}`;
  }
  return String(error);
}
