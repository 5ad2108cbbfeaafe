// What execute returns: a StepDecision (where the Flow goes next, how it ends
// or that a branch ends, optionally canceling other executions), its
// builders, and its encoding as the wire's StepDecision.
import type { WireChannelRef, WireStepDecision, WireStepMovement } from "../proto";
import { Channel, ChannelMap } from "./channels";
import { FLOW_LIMITS, invalid, stepTypeOf, type StepRef } from "./checks";
import { toPayload } from "./codec";
import { stepOptionsToWire, type StepOptions } from "./options";

/** One new Step execution of a decision. */
export interface StepMovement<I = unknown> {
  step: StepRef;
  /** Its input (JSON). Default null. */
  input?: I;
  /** Replaces the Step's declared options for this execution only. */
  options?: StepOptions;
}

type DecisionBody =
  | { kind: "goTo"; movements: StepMovement[] }
  | { kind: "gracefulComplete"; output: unknown }
  | { kind: "forceComplete"; output: unknown }
  | { kind: "forceFail"; reason: string }
  | { kind: "deadEnd" }
  | {
      kind: "forceCompleteIfChannelsEmpty";
      channels: (Channel<unknown> | ChannelMap<unknown>)[];
      output: unknown;
      otherwise: StepMovement[];
    };

/**
 * What execute returns: where the Flow goes next (goTo, goToMulti), how it
 * ends (gracefulComplete, forceComplete, forceFail, forceCompleteIfChannelsEmpty)
 * or that this branch ends (deadEnd); with cancelSteps / cancelSiblings it
 * also cancels other active Step executions. Immutable.
 */
export class StepDecision {
  readonly body: DecisionBody;
  /** Step types whose active executions are canceled with this decision. */
  readonly cancelStepTypes: readonly string[];
  readonly cancelsSiblings: boolean;
  /** Whether the run continues as new after this decision (continueAsNew()). */
  readonly continuesAsNew: boolean;

  /** @internal */
  constructor(body: DecisionBody, cancelStepTypes: readonly string[] = [], cancelsSiblings = false, continuesAsNew = false) {
    this.body = body;
    this.cancelStepTypes = cancelStepTypes;
    this.cancelsSiblings = cancelsSiblings;
    this.continuesAsNew = continuesAsNew;
  }
  get kind(): DecisionBody["kind"] {
    return this.body.kind;
  }
  /** The same decision, also canceling the active executions of these Step types. */
  cancelSteps(...steps: StepRef[]): StepDecision {
    const types = steps.map((s, i) => stepTypeOf(s, `cancelSteps argument ${i + 1}`));
    return new StepDecision(this.body, [...this.cancelStepTypes, ...types], this.cancelsSiblings, this.continuesAsNew);
  }
  /** The same decision, also canceling the executions started by the same parent execution as this one. */
  cancelSiblings(): StepDecision {
    return new StepDecision(this.body, this.cancelStepTypes, true, this.continuesAsNew);
  }
  /**
   * The same decision (goTo, goToMulti or deadEnd), after which the run
   * continues as a new run of its Flow ID ("<first run>.c<n>") as soon as no
   * attempt of it runs. The new run holds the Attributes, Channel messages,
   * active Step executions (same IDs) and Timers, with a fresh history: a
   * long loop stays bounded. Refused on a decision that closes the run.
   */
  continueAsNew(): StepDecision {
    if (this.body.kind !== "goTo" && this.body.kind !== "deadEnd") {
      throw invalid(`continueAsNew() goes with goTo, goToMulti or deadEnd, not ${this.body.kind}: that decision closes the run`);
    }
    return new StepDecision(this.body, this.cancelStepTypes, this.cancelsSiblings, true);
  }
}

function checkMovements(movements: StepMovement[], what: string): StepMovement[] {
  if (movements.length > FLOW_LIMITS.movementsPerDecision) {
    throw invalid(`${what} has ${movements.length} movements; the limit is ${FLOW_LIMITS.movementsPerDecision}`);
  }
  movements.forEach((m, i) => {
    if (typeof m !== "object" || m === null) throw invalid(`${what}: movement ${i + 1} is not a StepMovement`);
    stepTypeOf(m.step, `${what}: the step of movement ${i + 1}`);
    if (m.options !== undefined) stepOptionsToWire(m.options, `${what}: the options of movement ${i + 1}`);
  });
  return movements;
}

/** One new execution of `step` with `input`, optionally with other options. */
export function goTo<I = unknown>(step: StepRef, input?: I, options?: StepOptions): StepDecision {
  const m: StepMovement = { step, input };
  if (options !== undefined) m.options = options;
  return new StepDecision({ kind: "goTo", movements: checkMovements([m], "goTo") });
}

/** Several new executions at once (a fan-out), each with its input and optional options. */
export function goToMulti(...movements: StepMovement[]): StepDecision {
  if (movements.length === 0) throw invalid("goToMulti needs at least one StepMovement (deadEnd() ends a branch)");
  return new StepDecision({ kind: "goTo", movements: checkMovements(movements, "goToMulti") });
}

/** Adds `output` to the Flow's result; the Flow completes once no other Step execution is active. */
export function gracefulComplete(output?: unknown): StepDecision {
  return new StepDecision({ kind: "gracefulComplete", output: output ?? null });
}

/** Completes the Flow now with `output`, canceling every other active execution. */
export function forceComplete(output?: unknown): StepDecision {
  return new StepDecision({ kind: "forceComplete", output: output ?? null });
}

/** Fails the Flow now with `reason`, canceling every other active execution. */
export function forceFail(reason: string): StepDecision {
  if (typeof reason !== "string") throw invalid("forceFail needs a reason (a string)");
  return new StepDecision({ kind: "forceFail", reason });
}

/** This branch ends; the Flow goes on while other executions are active. */
export function deadEnd(): StepDecision {
  return new StepDecision({ kind: "deadEnd" });
}

/**
 * In one atomic check: completes the Flow with `output` when every named
 * Channel (a ChannelMap: every instance) is empty, else applies `otherwise`.
 */
export function forceCompleteIfChannelsEmpty(options: {
  channels: (Channel<any> | ChannelMap<any>)[];
  output?: unknown;
  otherwise?: StepMovement[];
}): StepDecision {
  if (!Array.isArray(options.channels) || options.channels.length === 0) {
    throw invalid("forceCompleteIfChannelsEmpty needs at least one Channel or ChannelMap");
  }
  options.channels.forEach((c, i) => {
    if (!(c instanceof Channel) && !(c instanceof ChannelMap)) {
      throw invalid(`forceCompleteIfChannelsEmpty: channel ${i + 1} is not a Channel or ChannelMap`);
    }
  });
  return new StepDecision({
    kind: "forceCompleteIfChannelsEmpty",
    channels: options.channels,
    output: options.output ?? null,
    otherwise: checkMovements(options.otherwise ?? [], "forceCompleteIfChannelsEmpty otherwise"),
  });
}

function movementToWire(m: StepMovement, what: string): WireStepMovement {
  const type = stepTypeOf(m.step, what);
  const wire: WireStepMovement = { stepType: type, input: toPayload(m.input ?? null, `the input of ${type} (${what})`) };
  if (m.options !== undefined) wire.options = stepOptionsToWire(m.options, `the options of ${type} (${what})`);
  return wire;
}

function channelRef(c: Channel<unknown> | ChannelMap<unknown>): WireChannelRef {
  return c instanceof ChannelMap
    ? { channel: c.name, instanceKey: "", allInstances: true }
    : { channel: c.name, instanceKey: c.instanceKey, allInstances: false };
}

/** The decision as the wire's StepDecision. */
export function decisionToWire(decision: StepDecision): WireStepDecision {
  const wire: WireStepDecision = {
    cancelStepTypes: [...decision.cancelStepTypes],
    cancelSiblings: decision.cancelsSiblings,
  };
  if (decision.continuesAsNew) wire.continueAsNew = true;
  const b = decision.body;
  switch (b.kind) {
    case "goTo":
      wire.goTo = { movements: b.movements.map((m, i) => movementToWire(m, `movement ${i + 1}`)) };
      break;
    case "gracefulComplete":
      wire.gracefulComplete = toPayload(b.output, "the gracefulComplete output");
      break;
    case "forceComplete":
      wire.forceComplete = toPayload(b.output, "the forceComplete output");
      break;
    case "forceFail":
      wire.forceFail = b.reason;
      break;
    case "deadEnd":
      wire.deadEnd = {};
      break;
    case "forceCompleteIfChannelsEmpty":
      wire.forceCompleteIfChannelsEmpty = {
        channels: b.channels.map(channelRef),
        output: toPayload(b.output, "the forceCompleteIfChannelsEmpty output"),
        otherwise: b.otherwise.map((m, i) => movementToWire(m, `otherwise movement ${i + 1}`)),
      };
      break;
  }
  return wire;
}
