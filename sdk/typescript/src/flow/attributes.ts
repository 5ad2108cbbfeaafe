// Attributes: typed values of one run, part of its Flow's persistence schema.
// An Attribute holds one value, an AttributeMap one value per runtime
// instance key. Steps and RPC handlers read the keys they declare (every
// declared key unless they name fewer) from their task and write them with
// their result; Clients read, write and wait for them (client.ts).
//
// int64 values are JavaScript numbers: writes must be safe integers
// (|n| <= 2^53 - 1), and a stored value beyond that range fails its read
// instead of coming back rounded. datetime values are Dates (Unix ms on the
// wire), json values any JSON value (an object, an array, a string, a number,
// a boolean or null; null is a value, `remove`/`removal` delete), bytes values
// Uint8Arrays (any bytes).
//
// An Attribute may be indexed for SearchFlows (docs/search.md, "Index types"):
// `Attribute.string("plan", { index: "keyword" })`. Which index types fit
// which Attribute types is the server's rule (src/flow/search_index.cc,
// fits()), checked here when the Attribute is declared; a json Attribute
// indexed "keywordArray" holds only a JSON array of strings.
//
// An Attribute may sync to the run's Attribute Store (`{ sync: true }`): the
// server projects its writes into a column of the same name of a PostgreSQL
// or MySQL table. The run's store is its start's `attributeStore`, else its
// Flow's (FlowDefinition.attributeStore). Only plain Attributes sync: an
// AttributeMap's options take no `sync` (a compile-time error; at run time,
// the declaration throws).
import type { WireAttribute, WireAttributeIndex, WireAttributeType, WireAttributeValue, WireIndexType } from "../proto";
import { checkName, FLOW_LIMITS, invalid, valueLimitText } from "./checks";
import type { JsonValue } from "./codec";
import { TaskError } from "./task-error";

export type AttributeTypeName = "string" | "int64" | "double" | "bool" | "datetime" | "json" | "bytes";

/** A JSON object, the value a json Attribute holds unless declared otherwise (`Attribute.json<T>`). */
export type JsonObject = { [key: string]: unknown };

/** The JavaScript value of each Attribute type. */
export interface AttributeValueTypes {
  string: string;
  int64: number;
  double: number;
  bool: boolean;
  datetime: Date;
  json: JsonValue;
  bytes: Uint8Array;
}

/** Any Attribute value (a json Attribute's may be typed by an interface: any object, or null). */
export type AttributeValue = AttributeValueTypes[AttributeTypeName] | object | null;

/**
 * How SearchFlows indexes an Attribute (the proto's IndexType): "keyword" (a
 * string matched whole: =, ranges, STARTS_WITH), "fullText" (a string,
 * tokenized and case-folded: = matches every word), "keywordArray" (a json
 * Attribute's array of strings, or one string: = is membership), "int",
 * "double", "bool", "datetime".
 */
export type IndexTypeName = "keyword" | "fullText" | "keywordArray" | "int" | "double" | "bool" | "datetime";

/** The index types each Attribute type takes (the server's rule: src/flow/search_index.cc, fits()). */
export const INDEX_TYPES_BY_ATTRIBUTE_TYPE: Readonly<Record<AttributeTypeName, readonly IndexTypeName[]>> = {
  string: ["keyword", "fullText", "keywordArray"],
  int64: ["int", "double"],
  double: ["double"],
  bool: ["bool"],
  datetime: ["datetime"],
  json: ["keywordArray"],
  bytes: [],
};

const WIRE_INDEX_TYPES: Record<IndexTypeName, WireIndexType> = {
  keyword: "INDEX_KEYWORD",
  fullText: "INDEX_FULL_TEXT",
  keywordArray: "INDEX_KEYWORD_ARRAY",
  int: "INDEX_INT",
  double: "INDEX_DOUBLE",
  bool: "INDEX_BOOL",
  datetime: "INDEX_DATETIME",
};

const INDEX_TYPE_OF_WIRE = new Map(Object.entries(WIRE_INDEX_TYPES).map(([t, w]) => [w, t as IndexTypeName]));

/** An IndexType by name ("INDEX_KEYWORD") as an IndexTypeName; undefined for UNSPECIFIED or an unknown one. */
export function indexTypeFromWire(type: string | undefined): IndexTypeName | undefined {
  return type === undefined ? undefined : INDEX_TYPE_OF_WIRE.get(type as WireIndexType);
}

/**
 * The fields every run has, which queries name as they are (src/flow/search_index.cc,
 * system_fields()): no index key may be one of them, in any case.
 */
export const SEARCH_SYSTEM_FIELDS = [
  "FlowId",
  "RunId",
  "FlowType",
  "Status",
  "StartTime",
  "CloseTime",
  "ExecutionDuration",
  "ParentFlowId",
  "ActiveStepTypes",
] as const;

/** An Attribute's index in its declaration: `Attribute.string("plan", { index: "keyword" })`. */
export interface IndexOptions<I extends IndexTypeName = IndexTypeName> {
  /** How SearchFlows indexes the Attribute. */
  index: I;
  /**
   * The name queries use for it. Default: the Attribute's key. Index keys
   * are shared by every Flow type: the server refuses a declaration that
   * gives one another index type than the live declaration of another Flow
   * type does (so several Flow types may share one, e.g. "CustomerId").
   */
  indexKey?: string;
}

/** Whether an Attribute syncs to the run's Attribute Store (AttributeDeclaration.sync). */
export interface SyncOptions {
  /**
   * Its writes are projected into the run's Attribute Store, a column named
   * by its key. The run's store is its start's `attributeStore`, else its
   * Flow's (FlowDefinition.attributeStore); a run without one syncs nothing.
   * Default false.
   */
  sync?: boolean;
}

/**
 * A plain Attribute's options: its index, if any, and whether it syncs:
 * `{ index: "keyword", indexKey?: "Plan", sync?: true }` or `{ sync: true }`.
 */
export type AttributeOptions<I extends IndexTypeName = IndexTypeName> = (IndexOptions<I> | { index?: undefined; indexKey?: undefined }) & SyncOptions;

/** The options of an Attribute type that takes no index (bytes): whether it syncs. */
export interface UnindexedAttributeOptions extends SyncOptions {
  index?: never;
  indexKey?: never;
}

/** The index of an indexed Attribute, as declared. */
export interface AttributeIndex {
  readonly type: IndexTypeName;
  /** The index key: the one given, or the Attribute's key. */
  readonly key: string;
}

/** The declared index checked against the Attribute's type; undefined for none. */
function checkIndex(options: unknown, type: AttributeTypeName, key: string, what: string): AttributeIndex | undefined {
  if (options === undefined) return undefined;
  if (typeof options !== "object" || options === null || Array.isArray(options)) {
    throw invalid(`${what}: the options must be an object ({ index?, indexKey?, sync? }), not ${describe(options)}`);
  }
  const { index, indexKey } = options as Partial<IndexOptions>;
  if (index === undefined) {
    if (indexKey !== undefined) throw invalid(`${what}: indexKey needs an index ({ index: "keyword", indexKey })`);
    return undefined;
  }
  if (typeof index !== "string" || !Object.hasOwn(WIRE_INDEX_TYPES, index)) {
    throw invalid(`${what}: index must be one of ${Object.keys(WIRE_INDEX_TYPES).join(", ")}, not ${String(index)}`);
  }
  const fitting = INDEX_TYPES_BY_ATTRIBUTE_TYPE[type];
  if (!fitting.includes(index)) {
    throw invalid(
      fitting.length === 0
        ? `${what}: a ${type} Attribute cannot be indexed`
        : `${what}: a ${type} Attribute cannot have a ${index} index; it takes ${fitting.join(", ")}`,
    );
  }
  const indexName = indexKey === undefined ? key : checkName(indexKey, `${what}: indexKey`);
  const system = SEARCH_SYSTEM_FIELDS.find((f) => f.toLowerCase() === indexName.toLowerCase());
  if (system !== undefined) {
    throw invalid(
      `${what}: the index key '${indexName}' is the system field '${system}'` +
        (indexKey === undefined ? "; give the Attribute another indexKey" : "; choose another indexKey"),
    );
  }
  return { type: index, key: indexName };
}

/** Whether the options make the Attribute sync; throws for a `sync` that is not a boolean. */
function checkSync(options: unknown, what: string): boolean {
  const sync = (options as SyncOptions | undefined)?.sync;
  if (sync === undefined) return false;
  if (typeof sync !== "boolean") throw invalid(`${what}: sync must be true or false, not ${describe(sync)}`);
  return sync;
}

/** An Attribute's index as its declaration carries it (index_key empty: the Attribute's key). */
export function attributeIndexToWire(key: string, index: AttributeIndex): WireAttributeIndex {
  return { type: WIRE_INDEX_TYPES[index.type], indexKey: index.key === key ? "" : index.key };
}

const WIRE_TYPES: Record<AttributeTypeName, WireAttributeType> = {
  string: "ATTRIBUTE_STRING",
  int64: "ATTRIBUTE_INT64",
  double: "ATTRIBUTE_DOUBLE",
  bool: "ATTRIBUTE_BOOL",
  datetime: "ATTRIBUTE_DATETIME",
  json: "ATTRIBUTE_JSON",
  bytes: "ATTRIBUTE_BYTES",
};

const WIRE_FIELDS: Record<AttributeTypeName, NonNullable<WireAttributeValue["value"]>> = {
  string: "stringValue",
  int64: "int64Value",
  double: "doubleValue",
  bool: "boolValue",
  datetime: "datetimeUnixMs",
  json: "jsonValue",
  bytes: "bytesValue",
};

const TYPE_OF_FIELD = new Map(Object.entries(WIRE_FIELDS).map(([t, f]) => [f, t as AttributeTypeName]));

export function attributeTypeToWire(type: AttributeTypeName): WireAttributeType {
  return WIRE_TYPES[type];
}

function checkType(type: unknown, what: string): AttributeTypeName {
  if (typeof type !== "string" || !Object.hasOwn(WIRE_TYPES, type)) {
    throw invalid(`${what}: the type must be one of ${Object.keys(WIRE_TYPES).join(", ")}, not ${String(type)}`);
  }
  return type as AttributeTypeName;
}

function describe(v: unknown): string {
  if (v === null) return "null";
  if (typeof v === "object") return `a ${(v as object).constructor?.name ?? "object"}`;
  return `a ${typeof v}`;
}

/**
 * `value` as the wire's AttributeValue for `type` (`index`: the Attribute's
 * index, if any: a json Attribute indexed "keywordArray" takes only an array
 * of strings); throws a DexError (INVALID_ARGUMENT) naming `what` when it is
 * not a value of that type. A json value is any value JSON.stringify writes:
 * an object, an array, a string, a finite number, a boolean or null (inside
 * it, as JSON.stringify does: NaN becomes null, undefined members are left
 * out); not undefined (that deletes), a function, a symbol, a bigint, a
 * Uint8Array (a bytes Attribute) or a Date.
 */
export function attributeValueToWire(type: AttributeTypeName, value: unknown, what: string, index?: IndexTypeName): WireAttributeValue {
  const wrong = (expected: string): never => {
    throw invalid(`${what} is a ${type} Attribute; it takes ${expected}, not ${describe(value)}`);
  };
  switch (type) {
    case "string":
      if (typeof value !== "string") wrong("a string");
      if (Buffer.byteLength(value as string, "utf8") > FLOW_LIMITS.valueBytes) throw invalid(`${what} is longer than ${valueLimitText()}`);
      return { stringValue: value as string };
    case "int64":
      if (typeof value !== "number" || !Number.isSafeInteger(value)) wrong("an integer number within +-(2^53 - 1)");
      return { int64Value: value as number };
    case "double":
      if (typeof value !== "number") wrong("a number");
      return { doubleValue: value as number };
    case "bool":
      if (typeof value !== "boolean") wrong("a boolean");
      return { boolValue: value as boolean };
    case "datetime":
      if (!(value instanceof Date) || Number.isNaN(value.getTime())) wrong("a valid Date");
      return { datetimeUnixMs: (value as Date).getTime() };
    case "json": {
      if (index === "keywordArray") {
        // The keywords its index takes (the server's rule: src/flow/result_check.cc).
        if (!Array.isArray(value)) {
          throw invalid(`${what} is a json Attribute indexed keywordArray; it takes an array of strings, not ${describe(value)}`);
        }
        const at = (value as unknown[]).findIndex((item) => typeof item !== "string");
        if (at >= 0) {
          throw invalid(
            `${what} is a json Attribute indexed keywordArray; it takes an array of strings, and element ${at} is ${describe((value as unknown[])[at])}`,
          );
        }
      } else if (
        value === undefined ||
        typeof value === "function" ||
        typeof value === "symbol" ||
        typeof value === "bigint" ||
        (typeof value === "number" && !Number.isFinite(value)) ||
        value instanceof Uint8Array ||
        value instanceof Date
      ) {
        wrong("a JSON value (an object, an array, a string, a finite number, a boolean or null)");
      }
      let text: string | undefined;
      try {
        text = JSON.stringify(value);
      } catch (error) {
        throw invalid(`${what} is not JSON-serializable: ${error instanceof Error ? error.message : String(error)}`);
      }
      if (text === undefined) wrong("a JSON value (an object, an array, a string, a finite number, a boolean or null)");
      if (Buffer.byteLength(text as string, "utf8") > FLOW_LIMITS.valueBytes) throw invalid(`${what} is larger than ${valueLimitText()} as JSON`);
      return { jsonValue: text as string };
    }
    case "bytes":
      if (!(value instanceof Uint8Array)) wrong("a Uint8Array (or Buffer)");
      if ((value as Uint8Array).length > FLOW_LIMITS.valueBytes) throw invalid(`${what} is larger than ${valueLimitText()}`);
      return { bytesValue: Buffer.from((value as Uint8Array).buffer, (value as Uint8Array).byteOffset, (value as Uint8Array).byteLength) };
  }
  return checkType(type, what) as never;
}

/** The type of a wire AttributeValue (the member set), or undefined when none is. */
export function wireAttributeType(v: WireAttributeValue | null | undefined): AttributeTypeName | undefined {
  if (v === null || v === undefined) return undefined;
  if (v.value !== undefined) return TYPE_OF_FIELD.get(v.value);
  // A value built here (no virtual oneof field): the member that is present.
  for (const [field, type] of TYPE_OF_FIELD) if ((v as Record<string, unknown>)[field] !== undefined) return type;
  return undefined;
}

/**
 * A wire AttributeValue as its JavaScript value, undefined when it has none;
 * throws a DexError (INVALID_ARGUMENT) naming `what` for an int64 beyond
 * the safe integers or JSON that does not parse.
 */
export function attributeValueFromWire(v: WireAttributeValue | null | undefined, what: string): AttributeValue | undefined {
  const type = wireAttributeType(v);
  if (type === undefined || v === null || v === undefined) return undefined;
  switch (type) {
    case "string":
      return v.stringValue ?? "";
    case "int64": {
      const n = Number(v.int64Value ?? 0);
      if (!Number.isSafeInteger(n)) throw invalid(`${what} holds the int64 ${n}, beyond what a JavaScript number keeps exactly`);
      return n;
    }
    case "double":
      return Number(v.doubleValue ?? 0);
    case "bool":
      return v.boolValue ?? false;
    case "datetime":
      return new Date(Number(v.datetimeUnixMs ?? 0));
    case "json":
      try {
        return JSON.parse(v.jsonValue ?? "null") as JsonValue;
      } catch (error) {
        throw invalid(`${what} holds JSON that does not parse: ${error instanceof Error ? error.message : String(error)}`);
      }
    case "bytes": {
      const b = v.bytesValue ?? new Uint8Array(0);
      return Buffer.from(b.buffer, b.byteOffset, b.byteLength);
    }
  }
}

/** One write of a Client's setAttributes or a start's initial Attributes: `value` undefined deletes. */
export interface AttributeWrite {
  readonly key: string;
  readonly instanceKey: string;
  readonly type: AttributeTypeName;
  /** The Attribute's index type, when it is indexed (a json one indexed keywordArray takes an array of strings). */
  readonly index?: IndexTypeName;
  readonly value: AttributeValue | undefined;
}

export function attributeWriteToWire(w: AttributeWrite, what: string): WireAttribute {
  const wire: WireAttribute = { key: w.key, instanceKey: w.instanceKey };
  if (w.value !== undefined) wire.value = attributeValueToWire(w.type, w.value, what, w.index);
  return wire;
}

/** What Attribute.get and friends need of a Step's or RPC handler's context. */
export interface AttributeScope {
  /** @internal */
  readonly attributeStore: AttributeStore;
}

function storeOf(ctx: AttributeScope, what: string): AttributeStore {
  const store = (ctx as Partial<AttributeScope> | null)?.attributeStore;
  if (!(store instanceof AttributeStore)) throw invalid(`${what} needs the StepContext or RpcContext of the running task`);
  return store;
}

/**
 * One typed value of a run, declared in its Flow's `attributes`. In waitFor,
 * execute and RPC handlers: get(ctx), set(ctx, v), remove(ctx). For Clients:
 * write(v) and removal() build the writes of setAttributes and of a start's
 * initialAttributes. Indexed (`{ index, indexKey? }`), SearchFlows finds runs
 * by its value (Client.searchFlows).
 */
export class Attribute<T extends AttributeValue = AttributeValue> {
  readonly key: string;
  readonly type: AttributeTypeName;
  /** How SearchFlows indexes it; undefined: not searchable. */
  readonly index: AttributeIndex | undefined;
  /** Its writes sync to the run's Attribute Store. */
  readonly sync: boolean;

  /**
   * Throws a DexError (INVALID_ARGUMENT) for a bad key or type, and for an
   * index that does not fit the type (string: keyword, fullText,
   * keywordArray; int64: int, double; double: double; bool: bool; datetime:
   * datetime; json: keywordArray; bytes: none) or a bad index key, and
   * for a `sync` that is not a boolean.
   */
  constructor(key: string, type: AttributeTypeName, options?: AttributeOptions) {
    this.key = checkName(key, "an Attribute key");
    this.type = checkType(type, `Attribute '${this.key}'`);
    this.index = checkIndex(options, this.type, this.key, `Attribute '${this.key}'`);
    this.sync = checkSync(options, `Attribute '${this.key}'`);
  }
  static string(key: string, options?: AttributeOptions<"keyword" | "fullText" | "keywordArray">): Attribute<string> {
    return new Attribute<string>(key, "string", options);
  }
  static int64(key: string, options?: AttributeOptions<"int" | "double">): Attribute<number> {
    return new Attribute<number>(key, "int64", options);
  }
  static double(key: string, options?: AttributeOptions<"double">): Attribute<number> {
    return new Attribute<number>(key, "double", options);
  }
  static bool(key: string, options?: AttributeOptions<"bool">): Attribute<boolean> {
    return new Attribute<boolean>(key, "bool", options);
  }
  static datetime(key: string, options?: AttributeOptions<"datetime">): Attribute<Date> {
    return new Attribute<Date>(key, "datetime", options);
  }
  /**
   * A JSON value: an object by default (JsonObject); give its type for
   * others, `Attribute.json<JsonValue>("doc")` for any (an array, a string,
   * a number, a boolean, null). Indexed "keywordArray", an array of strings
   * (the keywords a query's `=` and IN match one by one).
   */
  static json(key: string, options: IndexOptions<"keywordArray"> & SyncOptions): Attribute<string[]>;
  static json<T extends JsonValue | object = JsonObject>(key: string, options?: SyncOptions & { index?: undefined; indexKey?: undefined }): Attribute<T>;
  static json(key: string, options?: AttributeOptions<"keywordArray">): Attribute<any> {
    return new Attribute(key, "json", options);
  }
  static bytes(key: string, options?: UnindexedAttributeOptions): Attribute<Uint8Array> {
    return new Attribute<Uint8Array>(key, "bytes", options);
  }

  /** The current value (this task's own writes included); undefined when it has none. */
  get(ctx: AttributeScope): T | undefined {
    return storeOf(ctx, `get of Attribute '${this.key}'`).get(this.key, "") as T | undefined;
  }
  /** Sets it when the task's result is accepted, with it (get sees it at once). */
  set(ctx: AttributeScope, value: T): void {
    storeOf(ctx, `set of Attribute '${this.key}'`).write(this.key, "", this.type, value);
  }
  /** Deletes it when the task's result is accepted. */
  remove(ctx: AttributeScope): void {
    storeOf(ctx, `remove of Attribute '${this.key}'`).write(this.key, "", this.type, undefined);
  }
  /** A Client's write of `value` (Client.setAttributes, FlowStartOptions.initialAttributes). */
  write(value: T): AttributeWrite {
    attributeValueToWire(this.type, value, `the value of Attribute '${this.key}'`, this.index?.type);
    return { ...this.writeBase(), value };
  }
  /** A Client's deletion (Client.setAttributes). */
  removal(): AttributeWrite {
    return { ...this.writeBase(), value: undefined };
  }
  private writeBase(): Omit<AttributeWrite, "value"> {
    const base = { key: this.key, instanceKey: "", type: this.type };
    return this.index === undefined ? base : { ...base, index: this.index.type };
  }
}

/**
 * An AttributeMap's options: none yet. An AttributeMap cannot be indexed
 * (only a plain Attribute is searchable) nor sync to the Attribute Store
 * (only plain Attributes sync, one column each).
 */
export interface AttributeMapOptions {
  index?: never;
  indexKey?: never;
  sync?: never;
}

function checkMapOptions(options: unknown, what: string): void {
  if (options === undefined) return;
  const o = options as { index?: unknown; indexKey?: unknown; sync?: unknown } | null;
  if (typeof o !== "object" || o === null || o.index !== undefined || o.indexKey !== undefined) {
    throw invalid(`${what} cannot be indexed: only a plain Attribute is searchable (one value per run)`);
  }
  if (o.sync !== undefined && o.sync !== false) {
    throw invalid(`${what} cannot sync: only plain Attributes sync to the Attribute Store (one column each)`);
  }
}

/** Typed values by a runtime instance key (declared once, by key). Not searchable. */
export class AttributeMap<T extends AttributeValue = AttributeValue> {
  readonly key: string;
  readonly type: AttributeTypeName;

  constructor(key: string, type: AttributeTypeName, options?: AttributeMapOptions) {
    this.key = checkName(key, "an AttributeMap key");
    this.type = checkType(type, `AttributeMap '${this.key}'`);
    checkMapOptions(options, `AttributeMap '${this.key}'`);
  }
  static string(key: string, options?: AttributeMapOptions): AttributeMap<string> {
    return new AttributeMap<string>(key, "string", options);
  }
  static int64(key: string, options?: AttributeMapOptions): AttributeMap<number> {
    return new AttributeMap<number>(key, "int64", options);
  }
  static double(key: string, options?: AttributeMapOptions): AttributeMap<number> {
    return new AttributeMap<number>(key, "double", options);
  }
  static bool(key: string, options?: AttributeMapOptions): AttributeMap<boolean> {
    return new AttributeMap<boolean>(key, "bool", options);
  }
  static datetime(key: string, options?: AttributeMapOptions): AttributeMap<Date> {
    return new AttributeMap<Date>(key, "datetime", options);
  }
  /** JSON values: objects by default (JsonObject); `AttributeMap.json<JsonValue>("docs")` for any. */
  static json<T extends JsonValue | object = JsonObject>(key: string, options?: AttributeMapOptions): AttributeMap<T> {
    return new AttributeMap<T>(key, "json", options);
  }
  static bytes(key: string, options?: AttributeMapOptions): AttributeMap<Uint8Array> {
    return new AttributeMap<Uint8Array>(key, "bytes", options);
  }

  private instanceKeyOf(instanceKey: string): string {
    return checkName(instanceKey, `an instance key of AttributeMap '${this.key}'`);
  }
  /** The value of `instanceKey`; undefined when it has none. */
  get(ctx: AttributeScope, instanceKey: string): T | undefined {
    return storeOf(ctx, `get of AttributeMap '${this.key}'`).get(this.key, this.instanceKeyOf(instanceKey)) as T | undefined;
  }
  /** Every instance with a value, by instance key. */
  entries(ctx: AttributeScope): Map<string, T> {
    return storeOf(ctx, `entries of AttributeMap '${this.key}'`).instances(this.key) as Map<string, T>;
  }
  set(ctx: AttributeScope, instanceKey: string, value: T): void {
    storeOf(ctx, `set of AttributeMap '${this.key}'`).write(this.key, this.instanceKeyOf(instanceKey), this.type, value);
  }
  remove(ctx: AttributeScope, instanceKey: string): void {
    storeOf(ctx, `remove of AttributeMap '${this.key}'`).write(this.key, this.instanceKeyOf(instanceKey), this.type, undefined);
  }
  write(instanceKey: string, value: T): AttributeWrite {
    const ik = this.instanceKeyOf(instanceKey);
    attributeValueToWire(this.type, value, `the value of AttributeMap '${this.key}' [${ik}]`);
    return { key: this.key, instanceKey: ik, type: this.type, value };
  }
  removal(instanceKey: string): AttributeWrite {
    return { key: this.key, instanceKey: this.instanceKeyOf(instanceKey), type: this.type, value: undefined };
  }
}

export type AnyAttribute = Attribute<any> | AttributeMap<any>;
/** An Attribute key, or the Attribute (or AttributeMap) itself. */
export type AttributeRef = string | AnyAttribute;

export function attributeKeyOf(ref: AttributeRef, what: string): string {
  if (ref instanceof Attribute || ref instanceof AttributeMap) return ref.key;
  if (typeof ref === "string") return checkName(ref, what);
  throw invalid(`${what} must be an Attribute, an AttributeMap or a key, not ${describe(ref)}`);
}

/**
 * The Attributes one task sees: the values it carried for the keys it reads,
 * with its own writes applied as it makes them, and those writes in order
 * for its result. `from` names the Step execution or RPC in errors.
 */
export class AttributeStore {
  private readonly values = new Map<string, Map<string, AttributeValue>>();
  private readonly written = new Map<string, Set<string>>();
  private readonly writeList: WireAttribute[] = [];

  constructor(
    private readonly schema: ReadonlyMap<string, AnyAttribute>,
    private readonly reads: ReadonlySet<string>,
    carried: readonly WireAttribute[],
    private readonly from: string,
  ) {
    for (const a of carried) {
      const declared = schema.get(a.key);
      // Keys this Worker's Flow does not know (another version's) are no use to it.
      if (declared === undefined) continue;
      const value = attributeValueFromWire(a.value, this.name(a.key, a.instanceKey));
      if (value === undefined) continue;
      const type = wireAttributeType(a.value);
      if (type !== declared.type) {
        throw new TaskError(`the task carries ${this.name(a.key, a.instanceKey)} as a ${type}, but it is declared ${declared.type}`, {
          nonRetryable: true,
        });
      }
      this.valuesOf(a.key).set(a.instanceKey, value);
    }
  }

  private name(key: string, instanceKey: string): string {
    return instanceKey === "" ? `the Attribute '${key}'` : `the AttributeMap '${key}' [${instanceKey}]`;
  }

  private valuesOf(key: string): Map<string, AttributeValue> {
    let m = this.values.get(key);
    if (m === undefined) this.values.set(key, (m = new Map()));
    return m;
  }

  private declared(key: string, role: string): AnyAttribute {
    const a = this.schema.get(key);
    if (a === undefined) {
      throw new TaskError(
        `${this.from} ${role} the Attribute '${key}', which its Flow does not declare ` +
          `(its Attributes: ${[...this.schema.keys()].join(", ") || "none"})`,
        { nonRetryable: true },
      );
    }
    return a;
  }

  private checkRead(key: string, instanceKey: string | null): void {
    this.declared(key, "reads");
    if (this.reads.has(key)) return;
    // What this task wrote itself it knows.
    if (instanceKey !== null && this.written.get(key)?.has(instanceKey) === true) return;
    throw new TaskError(
      `${this.from} reads the Attribute '${key}', which is not among its attributeReads ` +
        `(${[...this.reads].join(", ") || "none"}): add it there`,
      { nonRetryable: true },
    );
  }

  get(key: string, instanceKey: string): AttributeValue | undefined {
    this.checkRead(key, instanceKey);
    return this.values.get(key)?.get(instanceKey);
  }

  instances(key: string): Map<string, AttributeValue> {
    this.checkRead(key, null);
    return new Map(this.values.get(key) ?? []);
  }

  write(key: string, instanceKey: string, type: AttributeTypeName, value: AttributeValue | undefined): void {
    const declared = this.declared(key, "writes");
    const isMap = declared instanceof AttributeMap;
    if (isMap !== (instanceKey !== "")) {
      throw new TaskError(
        isMap
          ? `${this.from} writes the AttributeMap '${key}' without an instance key`
          : `${this.from} writes the Attribute '${key}' with an instance key, but it is not an AttributeMap`,
        { nonRetryable: true },
      );
    }
    if (declared.type !== type) {
      throw new TaskError(`${this.from} writes '${key}' as a ${type}, but its Flow declares it ${declared.type}`, {
        nonRetryable: true,
      });
    }
    const wire: WireAttribute = { key, instanceKey };
    const index = declared instanceof Attribute ? declared.index?.type : undefined;
    if (value !== undefined) wire.value = attributeValueToWire(type, value, this.name(key, instanceKey), index);
    this.writeList.push(wire);
    let written = this.written.get(key);
    if (written === undefined) this.written.set(key, (written = new Set()));
    written.add(instanceKey);
    const values = this.valuesOf(key);
    if (value === undefined) values.delete(instanceKey);
    else values.set(instanceKey, value);
  }

  /** @internal The writes, in order, for the task's result. */
  writes(): WireAttribute[] {
    return this.writeList;
  }
}
