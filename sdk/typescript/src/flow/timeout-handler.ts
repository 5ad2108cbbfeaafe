// A Flow's timeout handler: with timeout policy "handler", when the flow
// timeout passes the server runs it once (a task of method ON_TIMEOUT) and
// applies the StepDecision it returns, with its Attribute writes and
// publishes, in one record (docs/flow-rules.md, "HANDLER").
import type { WireFlowTask } from "../proto";
import type { AttributeStore } from "./attributes";
import { TaskContext } from "./context";
import type { StepDecision } from "./decisions";

/** The timeout handler's environment: the run, its Attributes, publish and heartbeat. */
export class TimeoutContext<I = unknown> extends TaskContext {
  /** From 1: the handler is retried like a method when it fails. */
  readonly attempt: number;
  /** When its first attempt started (Unix ms). */
  readonly firstAttemptAt: number;
  /** What the task carries as its input (the run's input), decoded as JSON; null when empty. */
  readonly input: I;
  readonly attemptTimeoutMs: number;

  /** @internal */
  constructor(task: WireFlowTask, input: I, signal: AbortSignal, heartbeat: () => boolean, attributes: AttributeStore) {
    super(task, signal, heartbeat, attributes);
    this.attempt = task.attempt;
    this.firstAttemptAt = task.firstAttemptUnixMs;
    this.input = input;
    this.attemptTimeoutMs = task.attemptTimeoutMs;
  }
}

/**
 * Runs once when the flow timeout passes (timeout policy "handler"); returns
 * how the run goes on: typically forceFail(reason) after recording why, or
 * forceComplete, or goTo a Step that cleans up.
 */
export type TimeoutHandler = (ctx: TimeoutContext<any>) => StepDecision | Promise<StepDecision>;
