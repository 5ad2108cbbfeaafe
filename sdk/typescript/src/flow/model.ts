// The Flow and Step model: a Step type has an optional waitFor and an
// execute; a Flow lists its Step types, the one a run starts with, its
// persistence schema (Channels, Attributes), its RPCs and its optional
// timeout handler. A Flow is checked
// when constructed, declares itself in a Worker's hello, and checks the
// decisions, waits and publishes of its Steps.
import type { WireAttributeDeclaration, WireFlowDeclaration } from "../proto";
import {
  type AnyAttribute,
  Attribute,
  AttributeMap,
  attributeIndexToWire,
  attributeKeyOf,
  type AttributeRef,
  attributeTypeToWire,
} from "./attributes";
import { Channel, ChannelMap } from "./channels";
import { checkName, FLOW_LIMITS, invalid, stepTypeOf, type StepRef } from "./checks";
import type { StepContext } from "./context";
import type { StepDecision } from "./decisions";
import { mergeStepOptions, stepOptionsToWire, type MethodOptions, type StepOptions } from "./options";
import { Rpc, type RpcDefinition } from "./rpc";
import { flowConfigToWire, type FlowConfig } from "./start-options";
import { TaskError } from "./task-error";
import type { TimeoutHandler } from "./timeout-handler";
import type { Wait } from "./waits";

/**
 * A Step type. Implement it with a class (`class Ship implements Step<Order>`)
 * or an object literal. Without waitFor, execute runs at once.
 */
export interface Step<I = any> {
  readonly type: string;
  readonly options?: StepOptions;
  /** The Attributes its tasks read (get). Default: every key its Flow declares. */
  readonly attributeReads?: readonly AttributeRef[];
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
  /** The persistence schema: the Flow's typed Attributes and AttributeMaps. */
  attributes?: AnyAttribute[];
  /**
   * The Attribute Store (the server's attributeStore.stores.<name>) its runs'
   * synced Attributes (`{ sync: true }`) go to, unless a start names another
   * (RunStartOptions.attributeStore). Default: none.
   */
  attributeStore?: string;
  /**
   * The Flow's FlowConfig for its runs, e.g. `{ continueAsNewAfterEvents: 500 }`:
   * a run continues as new once its history holds that many events. A
   * start's RunStartOptions.config overrides it field by field.
   */
  config?: FlowConfig;
  /** Handlers Clients invoke on a running run (Client.invokeRpc). */
  rpcs?: (Rpc<any, any> | RpcDefinition<any, any>)[];
  /** Options every Step starts from; a Step's own options override them field by field. */
  defaultStepOptions?: StepOptions;
  /**
   * The timeout handler: with timeout policy "handler" (the default for a run
   * with a flow timeout started with this Flow object), it runs once when the
   * flow timeout passes and returns the run's StepDecision (Attribute writes
   * and publishes apply with it). Declared in the hello (has_timeout_handler).
   */
  handleTimeout?: TimeoutHandler;
  /**
   * The timeout handler's attempt timeout, retry, durability and heartbeat
   * timeout (a method's defaults; a handler that fails for good ends the run
   * TIMED_OUT), and the Attributes its task carries (default: every declared key).
   */
  timeoutHandlerOptions?: TimeoutHandlerOptions;
}

/** FlowDefinition.timeoutHandlerOptions. */
export interface TimeoutHandlerOptions extends Omit<MethodOptions, "lockKeys"> {
  attributeReads?: readonly AttributeRef[];
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

/**
 * The declared Attributes and AttributeMaps by key, checked: each key once,
 * each index key once, at most FLOW_LIMITS.indexedAttributesPerFlow indexed.
 */
function checkedAttributes(attributes: unknown, what: string): Map<string, AnyAttribute> {
  if (!Array.isArray(attributes)) throw invalid(`${what}: attributes must be an array`);
  if (attributes.length > FLOW_LIMITS.attributesPerFlow) {
    throw invalid(`${what} declares ${attributes.length} Attributes; the limit is ${FLOW_LIMITS.attributesPerFlow}`);
  }
  const byKey = new Map<string, AnyAttribute>();
  const byIndexKey = new Map<string, string>(); // index key -> Attribute key
  for (const a of attributes as unknown[]) {
    if (!(a instanceof Attribute) && !(a instanceof AttributeMap)) {
      throw invalid(`${what}: attributes holds something that is not an Attribute or AttributeMap`);
    }
    if (byKey.has(a.key)) throw invalid(`${what} declares the Attribute '${a.key}' twice`);
    byKey.set(a.key, a);
    if (a instanceof Attribute && a.index !== undefined) {
      const other = byIndexKey.get(a.index.key);
      if (other !== undefined) {
        throw invalid(`${what} declares the index key '${a.index.key}' twice (Attributes '${other}' and '${a.key}')`);
      }
      byIndexKey.set(a.index.key, a.key);
    }
  }
  if (byIndexKey.size > FLOW_LIMITS.indexedAttributesPerFlow) {
    throw invalid(`${what} declares ${byIndexKey.size} indexed Attributes; the limit is ${FLOW_LIMITS.indexedAttributesPerFlow}`);
  }
  return byKey;
}

/** The keys a Step or RPC reads: `reads` checked against the schema, or every declared key. */
function readKeys(reads: readonly AttributeRef[] | undefined, schema: ReadonlyMap<string, AnyAttribute>, what: string): string[] {
  if (reads === undefined) return [...schema.keys()];
  if (!Array.isArray(reads)) throw invalid(`${what}: attributeReads must be an array`);
  const keys: string[] = [];
  reads.forEach((r, i) => {
    const key = attributeKeyOf(r, `${what}: attributeReads[${i}]`);
    if (!schema.has(key)) {
      throw invalid(`${what} reads the Attribute '${key}', which its Flow does not declare (its Attributes: ${[...schema.keys()].join(", ") || "none"})`);
    }
    if (!keys.includes(key)) keys.push(key);
  });
  return keys;
}

/** The RPCs by name, checked: each name once. */
function checkedRpcs(rpcs: unknown, what: string): Map<string, Rpc<any, any>> {
  if (!Array.isArray(rpcs)) throw invalid(`${what}: rpcs must be an array`);
  if (rpcs.length > FLOW_LIMITS.rpcsPerFlow) throw invalid(`${what} declares ${rpcs.length} RPCs; the limit is ${FLOW_LIMITS.rpcsPerFlow}`);
  const byName = new Map<string, Rpc<any, any>>();
  for (const r of rpcs as unknown[]) {
    const rpc = r instanceof Rpc ? r : new Rpc(r as RpcDefinition<any, any>);
    if (byName.has(rpc.name)) throw invalid(`${what} declares the RPC '${rpc.name}' twice`);
    byName.set(rpc.name, rpc);
  }
  return byName;
}

/** The declaration's Steps: each one's merged options, its recoveryStep among the Steps, its Attribute reads. */
function declareSteps(
  steps: ReadonlyMap<string, Step<any>>,
  defaults: StepOptions | undefined,
  schema: ReadonlyMap<string, AnyAttribute>,
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
      attributeReads: readKeys(s.attributeReads, schema, `${what}: Step '${s.type}'`),
    };
  });
}

/** The timeout handler's declaration (options and reads); undefined without a handler or with nothing to declare. */
function timeoutHandlerDeclaration(
  definition: FlowDefinition,
  schema: ReadonlyMap<string, AnyAttribute>,
  what: string,
): WireFlowDeclaration["onTimeout"] {
  const o = definition.timeoutHandlerOptions;
  if (definition.handleTimeout === undefined) {
    if (o !== undefined) throw invalid(`${what}: timeoutHandlerOptions without a handleTimeout`);
    return undefined;
  }
  if (o !== undefined && (typeof o !== "object" || o === null)) throw invalid(`${what}: timeoutHandlerOptions must be an object`);
  const { attributeReads, ...method } = o ?? {};
  if ((method as MethodOptions).lockKeys !== undefined) throw invalid(`${what}: the timeout handler takes no lockKeys`);
  const options = stepOptionsToWire({ execute: method }, `${what}: timeoutHandlerOptions`).execute ?? {};
  const reads = readKeys(attributeReads, schema, `${what}: the timeout handler`);
  if (Object.keys(options).length === 0 && reads.length === 0) return undefined;
  return { options, attributeReads: reads };
}

/** A Flow type: its Steps, its start Step, its Channels, Attributes and RPCs. Checked when constructed. */
export class Flow {
  readonly type: string;
  readonly startStep: string;
  readonly steps: ReadonlyMap<string, Step<any>>;
  readonly channels: readonly AnyChannel[];
  /** By key. */
  readonly attributes: ReadonlyMap<string, AnyAttribute>;
  /** By name. */
  readonly rpcs: ReadonlyMap<string, Rpc<any, any>>;
  readonly defaultStepOptions: StepOptions | undefined;
  /** The Attribute Store its runs sync to by default; undefined: none. */
  readonly attributeStore: string | undefined;
  /** undefined: none (timeout policy "handler" is refused). */
  readonly timeoutHandler: TimeoutHandler | undefined;
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
    this.attributes = checkedAttributes(definition.attributes ?? [], what);
    this.rpcs = checkedRpcs(definition.rpcs ?? [], what);
    this.defaultStepOptions = definition.defaultStepOptions;
    this.attributeStore = definition.attributeStore === undefined ? undefined : checkName(definition.attributeStore, `${what}: attributeStore`);
    if (definition.handleTimeout !== undefined && typeof definition.handleTimeout !== "function") {
      throw invalid(`${what}: handleTimeout is not a function`);
    }
    this.timeoutHandler = definition.handleTimeout;
    const onTimeout = timeoutHandlerDeclaration(definition, this.attributes, what);
    this.wireDeclaration = {
      flowType: this.type,
      startStepType: this.startStep,
      steps: declareSteps(this.steps, this.defaultStepOptions, this.attributes, what),
      channels: this.channels.map((c) => ({ name: c.name, isMap: c instanceof ChannelMap })),
      attributes: [...this.attributes.values()].map((a) => {
        const declared: WireAttributeDeclaration = { key: a.key, type: attributeTypeToWire(a.type), isMap: a instanceof AttributeMap };
        // Set only for an indexed Attribute, so that others declare what they did before.
        if (a instanceof Attribute && a.index !== undefined) declared.index = attributeIndexToWire(a.key, a.index);
        if (a instanceof Attribute && a.sync) declared.sync = true;
        return declared;
      }),
      rpcs: [...this.rpcs.values()].map((r) => ({
        name: r.name,
        lockKeys: [...r.lockKeys],
        attributeReads: readKeys(r.attributeReads, this.attributes, `${what}: RPC '${r.name}'`),
      })),
    };
    // Set only with a handler, so that a Flow without one declares what it did before.
    if (this.timeoutHandler !== undefined) this.wireDeclaration.hasTimeoutHandler = true;
    if (onTimeout !== undefined) this.wireDeclaration.onTimeout = onTimeout;
    if (this.attributeStore !== undefined) this.wireDeclaration.attributeStore = this.attributeStore;
    // Set only when given, so that a Flow without one declares what it did before.
    if (definition.config !== undefined) this.wireDeclaration.config = flowConfigToWire(definition.config, `${what}: config`);
  }

  /** Whether the Flow declares a timeout handler. */
  get hasTimeoutHandler(): boolean {
    return this.timeoutHandler !== undefined;
  }

  /** The Attribute keys a task of this Step type (or, with `rpc`, of this RPC; with `timeout`, of the timeout handler) reads. */
  attributeReads(name: string, rpc: boolean | "timeout" = false): string[] {
    if (rpc === "timeout") return [...(this.wireDeclaration.onTimeout?.attributeReads ?? [])];
    const list = rpc ? this.wireDeclaration.rpcs.find((r) => r.name === name) : this.wireDeclaration.steps.find((s) => s.stepType === name);
    return list === undefined ? [] : [...list.attributeReads];
  }

  /** The RPC of this name, if declared. */
  rpc(name: string): Rpc<any, any> | undefined {
    return this.rpcs.get(name);
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
  checkDecision(decision: StepDecision, from: string, who = `Step '${from}'`): void {
    this.checkMovements(decision, who);
    if (decision.body.kind === "forceCompleteIfChannelsEmpty") {
      for (const c of decision.body.channels) {
        this.checkChannel(c.name, c instanceof ChannelMap ? null : c.instanceKey, from, "checks", who);
      }
    }
  }

  /** Throws a TaskError (non-retryable) when the decision's movements or cancels name a Step this Flow does not declare. */
  checkMovements(decision: StepDecision, who: string): void {
    const mustBeStep = (type: string, role: string): void => {
      if (!this.steps.has(type)) {
        throw new TaskError(
          `${who} decided ${role} '${type}', which Flow '${this.type}' does not declare ` +
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
  }

  /**
   * Throws a TaskError (non-retryable) when a wait's, publish's or check's
   * Channel is not declared as used (`instanceKey` null: a whole ChannelMap).
   */
  checkChannel(name: string, instanceKey: string | null, from: string, role: string, who = `Step '${from}'`): void {
    const c = this.channels.find((x) => x.name === name);
    if (c === undefined) {
      throw new TaskError(
        `${who} ${role} the Channel '${name}', which Flow '${this.type}' does not declare ` +
          `(its Channels: ${this.channels.map((x) => x.name).join(", ") || "none"})`,
        { nonRetryable: true },
      );
    }
    if (instanceKey === null) return;
    const isMap = c instanceof ChannelMap;
    if (isMap && instanceKey === "") {
      throw new TaskError(`${who} ${role} the ChannelMap '${name}' without an instance key (use map.instance(key))`, {
        nonRetryable: true,
      });
    }
    if (!isMap && instanceKey !== "") {
      throw new TaskError(`${who} ${role} the Channel '${name}' with an instance key, but it is not a ChannelMap`, {
        nonRetryable: true,
      });
    }
  }
}
