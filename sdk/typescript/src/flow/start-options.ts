// The options a new run starts with, shared by Client.startFlow and SubFlow
// conditions: the flow timeout and its policy, a start delay, initial
// Attributes, the Flow retry policy (docs/flow-rules.md, "Flow retry") and
// the Attribute Store, encoded as the wire's StartOptions.
import type { WireAttribute, WireFlowConfig, WireStartOptions } from "../proto";
import { attributeWriteToWire, type AttributeWrite } from "./attributes";
import { checkDuration, checkName, invalid } from "./checks";
import { retryToWire, type RetryOptions } from "./options";

/**
 * What happens when the flow timeout passes: "fail" (the run ends TIMED_OUT;
 * a retry policy may start it again), "cancel" (it ends CANCELED), "handler"
 * (the Flow's timeout handler runs once and decides; only for a Flow that
 * declares one).
 */
export type TimeoutPolicy = "fail" | "cancel" | "handler";

/** How a run starts, whoever starts it (a Client or a SubFlow condition). */
export interface RunStartOptions {
  /** The run's own timeout (0 or unset: none); what happens then: `timeoutPolicy`. */
  flowTimeoutMs?: number;
  /**
   * Default with a timeout: "handler" when the Flow given (a Flow object, not
   * a type name) declares a timeout handler, else "fail" (the server's).
   * Needs `flowTimeoutMs`.
   */
  timeoutPolicy?: TimeoutPolicy;
  /** The start Step waits this long first. */
  startDelayMs?: number;
  /** Attributes written with the start, in the same record (attr.write(v), map.write(key, v)); each must be declared. */
  initialAttributes?: AttributeWrite[];
  /**
   * Flow retry: a run that ends FAILED or TIMED_OUT (policy "fail") starts
   * again as a new run of the same Flow ID (new run ID, same input and
   * options) after the backoff. `maximumAttempts` counts runs, the first
   * included (default 3; 0: no limit); `totalDurationMs` from the first
   * run's start. CANCELED, TERMINATED and a Client's stopFlow never retry.
   */
  retryPolicy?: RetryOptions;
  /**
   * The Attribute Store (the server's attributeStore.stores.<name>) the run's
   * synced Attributes (`{ sync: true }`) go to, instead of its Flow's
   * (FlowDefinition.attributeStore).
   */
  attributeStore?: string;
  /** Overrides the Flow's FlowConfig (FlowDefinition.config) field by field, e.g. its continue-as-new thresholds. */
  config?: FlowConfig;
}

/**
 * A Flow's configuration for its runs (docs/flow-rules.md, "FlowConfig"):
 * the Flow's (FlowDefinition.config), each field a start sets
 * (RunStartOptions.config) overriding it. A field left out is not set.
 */
export interface FlowConfig {
  /** Continue as new once the run's history holds this many events (a whole number above 0). */
  continueAsNewAfterEvents?: number;
  /** Continue as new once the run's history events hold this many bytes (a whole number above 0). */
  continueAsNewAfterBytes?: number;
  /** The durability of Step methods whose options set none (default "sync"). */
  defaultDurability?: "sync" | "async";
  /** The Attribute Store the runs sync to (the same as attributeStore; both given, they must agree). */
  attributeStore?: string;
  /** Whether search's ActiveStepTypes holds the run's active Step types (default true). */
  indexActiveStepTypes?: boolean;
}

const FLOW_CONFIG_FIELDS = [
  "continueAsNewAfterEvents",
  "continueAsNewAfterBytes",
  "defaultDurability",
  "attributeStore",
  "indexActiveStepTypes",
] as const;

function aboveZero(value: unknown, what: string): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value <= 0) {
    throw invalid(`${what} must be a whole number above 0, not ${String(value)}`);
  }
  return value;
}

/** The config as the wire's FlowConfig; throws a DexError (INVALID_ARGUMENT) naming a bad field. */
export function flowConfigToWire(config: FlowConfig, what: string): WireFlowConfig {
  if (typeof config !== "object" || config === null) throw invalid(`${what} must be an object`);
  for (const key of Object.keys(config)) {
    if (!(FLOW_CONFIG_FIELDS as readonly string[]).includes(key)) {
      throw invalid(`${what}: '${key}' is not a FlowConfig field (${FLOW_CONFIG_FIELDS.join(", ")})`);
    }
  }
  const wire: WireFlowConfig = {};
  if (config.continueAsNewAfterEvents !== undefined) {
    wire.continueAsNewAfterEvents = aboveZero(config.continueAsNewAfterEvents, `${what}: continueAsNewAfterEvents`);
  }
  if (config.continueAsNewAfterBytes !== undefined) {
    wire.continueAsNewAfterBytes = aboveZero(config.continueAsNewAfterBytes, `${what}: continueAsNewAfterBytes`);
  }
  if (config.defaultDurability !== undefined) {
    wire.defaultDurability = enumToWire(config.defaultDurability, { sync: "SYNC", async: "ASYNC" }, `${what}: defaultDurability`);
  }
  if (config.attributeStore !== undefined) wire.attributeStore = checkName(config.attributeStore, `${what}: attributeStore`);
  if (config.indexActiveStepTypes !== undefined) {
    if (typeof config.indexActiveStepTypes !== "boolean") {
      throw invalid(`${what}: indexActiveStepTypes must be a boolean, not ${String(config.indexActiveStepTypes)}`);
    }
    wire.indexActiveStepTypes = config.indexActiveStepTypes;
  }
  return wire;
}

const TIMEOUT_POLICIES: Record<TimeoutPolicy, string> = {
  fail: "TIMEOUT_FAIL",
  cancel: "TIMEOUT_CANCEL",
  handler: "TIMEOUT_HANDLER",
};

/** A value among `names`' keys, as the wire's enum name; `what` names it in the error. */
export function enumToWire(value: unknown, names: Readonly<Record<string, string>>, what: string): string {
  const wire = typeof value === "string" && Object.hasOwn(names, value) ? names[value] : undefined;
  if (wire === undefined) throw invalid(`${what} must be one of ${Object.keys(names).join(", ")}, not ${String(value)}`);
  return wire;
}

/** Writes as the wire's Attributes; `removals`: whether a write may delete (a start only sets). */
export function attributeWritesToWire(writes: unknown, what: string, removals: boolean): WireAttribute[] {
  if (!Array.isArray(writes)) throw invalid(`${what} must be an array of writes (attr.write(v))`);
  return (writes as unknown[]).map((x, i) => {
    const w = x as Partial<AttributeWrite> | null;
    if (typeof w !== "object" || w === null || typeof w.key !== "string" || typeof w.type !== "string") {
      throw invalid(`${what}[${i}] is not a write (attr.write(v), map.write(key, v))`);
    }
    if (w.value === undefined && !removals) throw invalid(`${what}[${i}] deletes '${w.key}'; a start can only set values`);
    return attributeWriteToWire(w as AttributeWrite, `${what}[${i}] ('${w.key}')`);
  });
}

/**
 * The options as the wire's StartOptions (the fields of a run, without the
 * ID reuse policy and request ID, which only a Client's start has).
 * `hasTimeoutHandler`: whether the Flow declares a timeout handler (undefined:
 * unknown, a type name). Throws a DexError (INVALID_ARGUMENT) naming a bad field.
 */
export function runStartOptionsToWire(
  o: RunStartOptions,
  what: string,
  hasTimeoutHandler: boolean | undefined,
): WireStartOptions {
  if (typeof o !== "object" || o === null) throw invalid(`${what} must be an object`);
  const wire: WireStartOptions = {};
  const timeoutMs = o.flowTimeoutMs === undefined ? 0 : checkDuration(o.flowTimeoutMs, `${what}: flowTimeoutMs`);
  if (timeoutMs > 0) wire.timeoutMs = timeoutMs;
  if (o.timeoutPolicy !== undefined) {
    const policy = enumToWire(o.timeoutPolicy, TIMEOUT_POLICIES, `${what}: timeoutPolicy`);
    if (timeoutMs === 0) throw invalid(`${what}: timeoutPolicy '${o.timeoutPolicy}' needs a flowTimeoutMs`);
    if (o.timeoutPolicy === "handler" && hasTimeoutHandler === false) {
      throw invalid(`${what}: timeoutPolicy 'handler' needs a Flow with a timeout handler (handleTimeout), and it has none`);
    }
    wire.timeoutPolicy = policy;
  } else if (timeoutMs > 0 && hasTimeoutHandler === true) {
    wire.timeoutPolicy = TIMEOUT_POLICIES.handler;
  }
  if (o.startDelayMs !== undefined) wire.startDelayMs = checkDuration(o.startDelayMs, `${what}: startDelayMs`);
  if (o.initialAttributes !== undefined) {
    wire.initialAttributes = attributeWritesToWire(o.initialAttributes, `${what}: initialAttributes`, false);
  }
  if (o.retryPolicy !== undefined) {
    if (typeof o.retryPolicy !== "object" || o.retryPolicy === null) throw invalid(`${what}: retryPolicy must be an object`);
    wire.retryPolicy = retryToWire(o.retryPolicy, `${what}: retryPolicy`);
  }
  if (o.attributeStore !== undefined) wire.attributeStore = checkName(o.attributeStore, `${what}: attributeStore`);
  if (o.config !== undefined) wire.config = flowConfigToWire(o.config, `${what}: config`);
  return wire;
}
