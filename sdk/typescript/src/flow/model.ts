// The Flow and Step model: a Step type has an optional waitFor and an
// execute; a Flow lists its Step types, the one a run starts with, and its
// Channels. A Flow is checked when constructed, declares itself in a
// Worker's hello, and checks the decisions, waits and publishes of its Steps.
import type { WireFlowDeclaration } from "../proto";
import { Channel, ChannelMap } from "./channels";
import { checkName, invalid, stepTypeOf, type StepRef } from "./checks";
import type { StepContext } from "./context";
import type { StepDecision } from "./decisions";
import { mergeStepOptions, stepOptionsToWire, type StepOptions } from "./options";
import { TaskError } from "./task-error";
import type { Wait } from "./waits";

/**
 * A Step type. Implement it with a class (`class Ship implements Step<Order>`)
 * or an object literal. Without waitFor, execute runs at once.
 */
export interface Step<I = any> {
  readonly type: string;
  readonly options?: StepOptions;
  waitFor?(ctx: StepContext<I>): Wait | Promise<Wait>;
  execute(ctx: StepContext<I>): StepDecision | Promise<StepDecision>;
}

export interface FlowDefinition {
  /** The Flow type's name. */
  type: string;
  /** The Step that a new run starts with. */
  startStep: StepRef;
  /** Every Step type the Flow may reach. */
  steps: Step<any>[];
  /** The persistence schema: the Flow's Channels and ChannelMaps. */
  channels?: (Channel<any> | ChannelMap<any>)[];
  /** Options every Step starts from; a Step's own options override them field by field. */
  defaultStepOptions?: StepOptions;
}

type AnyChannel = Channel<any> | ChannelMap<any>;

/** The Step types of a definition by type, each checked; `what` names the Flow. */
function stepsByType(steps: unknown, what: string): Map<string, Step<any>> {
  if (!Array.isArray(steps) || steps.length === 0) throw invalid(`${what} needs at least one Step`);
  const byType = new Map<string, Step<any>>();
  (steps as Step<any>[]).forEach((s, i) => {
    if (typeof s !== "object" || s === null || typeof s.execute !== "function") {
      throw invalid(`${what}: step ${i + 1} is not a Step (it needs a type and an execute method)`);
    }
    const type = checkName(s.type, `${what}: the type of step ${i + 1}`);
    if (byType.has(type)) throw invalid(`${what} lists the Step type '${type}' twice`);
    if (s.waitFor !== undefined && typeof s.waitFor !== "function") {
      throw invalid(`${what}: waitFor of Step '${type}' is not a function`);
    }
    byType.set(type, s);
  });
  return byType;
}

/** The declared Channels and ChannelMaps, checked: each itself (not an instance), each name once. */
function checkedChannels(channels: AnyChannel[], what: string): AnyChannel[] {
  const names = new Set<string>();
  for (const c of channels) {
    if (!(c instanceof Channel) && !(c instanceof ChannelMap)) throw invalid(`${what}: channels holds something that is not a Channel or ChannelMap`);
    if (c instanceof Channel && c.isMapInstance) {
      throw invalid(`${what}: declare the ChannelMap '${c.name}' itself, not one of its instances`);
    }
    if (names.has(c.name)) throw invalid(`${what} declares the Channel '${c.name}' twice`);
    names.add(c.name);
  }
  return [...channels];
}

/** The declaration's Steps: each one's merged options, its recoveryStep among the Steps. */
function declareSteps(
  steps: ReadonlyMap<string, Step<any>>,
  defaults: StepOptions | undefined,
  what: string,
): WireFlowDeclaration["steps"] {
  return [...steps.values()].map((s) => {
    const options = mergeStepOptions(defaults, s.options);
    const recovery = options.execute?.recoveryStep;
    if (recovery !== undefined) {
      const r = stepTypeOf(recovery, `${what}: the recoveryStep of '${s.type}'`);
      if (!steps.has(r)) throw invalid(`${what}: the recoveryStep '${r}' of Step '${s.type}' is not one of its Steps`);
    }
    return {
      stepType: s.type,
      hasWaitFor: typeof s.waitFor === "function",
      options: stepOptionsToWire(options, `${what}: the options of Step '${s.type}'`),
    };
  });
}

/** A Flow type: its Steps, its start Step and its Channels. Checked when constructed. */
export class Flow {
  readonly type: string;
  readonly startStep: string;
  readonly steps: ReadonlyMap<string, Step<any>>;
  readonly channels: readonly AnyChannel[];
  readonly defaultStepOptions: StepOptions | undefined;
  private readonly wireDeclaration: WireFlowDeclaration;

  /** Throws a DexError (INVALID_ARGUMENT) that says what is wrong with the definition. */
  constructor(definition: FlowDefinition) {
    this.type = checkName(definition.type, "the Flow type");
    const what = `Flow '${this.type}'`;
    this.steps = stepsByType(definition.steps, what);
    this.startStep = stepTypeOf(definition.startStep, `${what}: startStep`);
    if (!this.steps.has(this.startStep)) {
      throw invalid(`${what}: the start Step '${this.startStep}' is not one of its Steps (${[...this.steps.keys()].join(", ")})`);
    }
    this.channels = checkedChannels(definition.channels ?? [], what);
    this.defaultStepOptions = definition.defaultStepOptions;
    this.wireDeclaration = {
      flowType: this.type,
      startStepType: this.startStep,
      steps: declareSteps(this.steps, this.defaultStepOptions, what),
      channels: this.channels.map((c) => ({ name: c.name, isMap: c instanceof ChannelMap })),
    };
  }

  /** What a Worker declares in its hello. */
  declaration(): WireFlowDeclaration {
    return this.wireDeclaration;
  }

  /** The Step of this type, if declared. */
  step(type: string): Step<any> | undefined {
    return this.steps.get(type);
  }

  /** Throws a TaskError (non-retryable) when the decision names a Step or Channel this Flow does not declare. */
  checkDecision(decision: StepDecision, from: string): void {
    const mustBeStep = (type: string, role: string): void => {
      if (!this.steps.has(type)) {
        throw new TaskError(
          `Step '${from}' decided ${role} '${type}', which Flow '${this.type}' does not declare ` +
            `(its Steps: ${[...this.steps.keys()].join(", ")})`,
          { nonRetryable: true },
        );
      }
    };
    const b = decision.body;
    const movements = b.kind === "goTo" ? b.movements : b.kind === "forceCompleteIfChannelsEmpty" ? b.otherwise : [];
    for (const m of movements) {
      mustBeStep(stepTypeOf(m.step, "a movement's step"), b.kind === "goTo" ? "goTo" : "otherwise goTo");
      const recovery = m.options?.execute?.recoveryStep;
      if (recovery !== undefined) mustBeStep(stepTypeOf(recovery, "recoveryStep"), "a recoveryStep");
    }
    for (const t of decision.cancelStepTypes) mustBeStep(t, "to cancel the Step type");
    if (b.kind === "forceCompleteIfChannelsEmpty") {
      for (const c of b.channels) this.checkChannel(c.name, c instanceof ChannelMap ? null : c.instanceKey, from, "checks");
    }
  }

  /**
   * Throws a TaskError (non-retryable) when a wait's, publish's or check's
   * Channel is not declared as used (`instanceKey` null: a whole ChannelMap).
   */
  checkChannel(name: string, instanceKey: string | null, from: string, role: string): void {
    const c = this.channels.find((x) => x.name === name);
    if (c === undefined) {
      throw new TaskError(
        `Step '${from}' ${role} the Channel '${name}', which Flow '${this.type}' does not declare ` +
          `(its Channels: ${this.channels.map((x) => x.name).join(", ") || "none"})`,
        { nonRetryable: true },
      );
    }
    if (instanceKey === null) return;
    const isMap = c instanceof ChannelMap;
    if (isMap && instanceKey === "") {
      throw new TaskError(`Step '${from}' ${role} the ChannelMap '${name}' without an instance key (use map.instance(key))`, {
        nonRetryable: true,
      });
    }
    if (!isMap && instanceKey !== "") {
      throw new TaskError(`Step '${from}' ${role} the Channel '${name}' with an instance key, but it is not a ChannelMap`, {
        nonRetryable: true,
      });
    }
  }
}
