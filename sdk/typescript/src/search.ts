// Finding Flows: what Client.searchFlows and searchAllFlows send and answer
// (SearchFlows in dex.FlowService; the query language is the server's,
// src/search/query.h), and searchQuery, which writes values into a query as
// its literals.
//
// A row carries the run's system columns and the values of the fields the
// query names or `fields` asks for, by index key: KEYWORD and FULL_TEXT a
// string, KEYWORD_ARRAY a string[], INT and DOUBLE a number, BOOL a boolean,
// DATETIME a Date (the types of the Attribute values they index; the row's
// own times are Unix milliseconds, as in a FlowDescription).
import { Attribute, type AttributeValue, type IndexTypeName, indexTypeFromWire } from "./flow/attributes";
import { DexError } from "./errors";
import { toRunStatus, type RunStatus } from "./flow-types";
import type { CallOptions } from "./client";
import type {
  WireFlowSearchRow,
  WireListSearchKeysResponse,
  WireListSearchValuesResponse,
  WireSearchField,
  WireSearchFlowsRequest,
  WireSearchFlowsResponse,
} from "./proto";

/**
 * SearchFlows' page size: 0 means the server's default (100); at most 1,000
 * (kPageSizeDefault, kPageSizeMax in src/search/search.h).
 */
export const SEARCH_PAGE_SIZE_DEFAULT = 100;
export const SEARCH_PAGE_SIZE_MAX = 1000;
/** Fields one search may ask for (src/search/search.cc). */
export const SEARCH_FIELDS_MAX = 100;

/** A field's value in a row: KEYWORD, FULL_TEXT a string; KEYWORD_ARRAY string[]; INT, DOUBLE a number; BOOL a boolean; DATETIME a Date. */
export type SearchFieldValue = string | string[] | number | boolean | Date;

/** A field a search asks for: an index key, a system field ("CloseTime", ...), or an indexed Attribute (its index key). */
export type SearchFieldRef = string | Attribute<any>;

export interface SearchFlowsOptions extends CallOptions {
  /** Rows per page: 1..1,000; 0 or unset: 100. */
  pageSize?: number;
  /** The previous page's nextPageToken, with the same query; unset or "": the first page. */
  pageToken?: string;
  /**
   * Fields whose values each row carries besides those the query names: index
   * keys, system fields, or indexed Attributes (at most 100).
   */
  fields?: SearchFieldRef[];
}

/** One run a search found. */
export class FlowSearchRow {
  readonly flowId: string;
  readonly runId: string;
  readonly flowType: string;
  readonly status: RunStatus;
  /** When the run started (Unix ms). */
  readonly startedAt: number;
  /** When it closed (Unix ms); 0 while RUNNING. */
  readonly closedAt: number;
  /** A SubFlow child: the Flow ID of the parent that started it; "" otherwise. */
  readonly parentFlowId: string;
  /**
   * By index key (or system field): the values of the fields the query names
   * or `fields` asked for, that the run holds (a field it has no value of is
   * absent).
   */
  readonly fields: Readonly<Record<string, SearchFieldValue>>;
  private readonly types: ReadonlyMap<string, IndexTypeName>;

  /** @internal */
  constructor(wire: WireFlowSearchRow) {
    this.flowId = wire.flowId;
    this.runId = wire.runId;
    this.flowType = wire.flowType;
    this.status = toRunStatus(wire.status);
    this.startedAt = Number(wire.startUnixMs ?? 0);
    this.closedAt = Number(wire.closeUnixMs ?? 0);
    this.parentFlowId = wire.parentFlowId ?? "";
    const types = new Map<string, IndexTypeName>();
    const values: [string, SearchFieldValue][] = [];
    for (const f of wire.fields ?? []) {
      const typed = searchFieldValue(f, `the field '${f.key}' of run ${wire.runId} of ${wire.flowId}`);
      if (typed === undefined) continue; // an index type this SDK does not know (a newer server)
      types.set(f.key, typed.type);
      values.push([f.key, typed.value]);
    }
    // fromEntries defines own properties: any index key, "__proto__" too, is a plain key.
    this.fields = Object.freeze(Object.fromEntries(values));
    this.types = types;
  }

  /**
   * The value of an indexed Attribute in this row, as the Attribute's own type
   * (a string Attribute indexed keywordArray: its string); undefined when the
   * row does not carry it: the run has no value, or neither the query nor
   * `fields` named its index key. Throws a DexError (INVALID_ARGUMENT) for an
   * Attribute that is not indexed, or indexed with another type than the row's field.
   */
  get<T extends AttributeValue>(attribute: Attribute<T>): T | undefined {
    if (!(attribute instanceof Attribute)) {
      throw new DexError("INVALID_ARGUMENT", "FlowSearchRow.get needs an indexed Attribute (rows carry no AttributeMaps)");
    }
    const index = attribute.index;
    if (index === undefined) {
      throw new DexError("INVALID_ARGUMENT", `the Attribute '${attribute.key}' is not indexed: searches know nothing of it`);
    }
    const value = this.fields[index.key];
    if (value === undefined) return undefined;
    const type = this.types.get(index.key);
    if (type !== index.type) {
      throw new DexError(
        "INVALID_ARGUMENT",
        `the row's field '${index.key}' is ${String(type)}, but the Attribute '${attribute.key}' is indexed ${index.type}`,
      );
    }
    if (attribute.type === "string" && Array.isArray(value)) return value[0] as T | undefined;
    return value as T;
  }
}

/** One page of a search. */
export interface FlowSearchPage {
  rows: FlowSearchRow[];
  /** Pass it as pageToken (with the same query) for the next page; "": there is none. */
  nextPageToken: string;
  /** The log slot whose state answered: every write acknowledged before the call is in it. */
  appliedSlot: number;
}

/** A SearchField as its type's value; undefined for an index type this SDK does not know. */
function searchFieldValue(f: WireSearchField, what: string): { type: IndexTypeName; value: SearchFieldValue } | undefined {
  const type = indexTypeFromWire(f.type);
  switch (type) {
    case "keyword":
    case "fullText":
      return { type, value: f.text ?? "" };
    case "keywordArray":
      return { type, value: [...(f.items ?? [])] };
    case "int": {
      const n = Number(f.intValue ?? 0);
      if (!Number.isSafeInteger(n)) {
        throw new DexError("INVALID_ARGUMENT", `${what} holds the int64 ${n}, beyond what a JavaScript number keeps exactly`);
      }
      return { type, value: n };
    }
    case "double":
      return { type, value: Number(f.doubleValue ?? 0) };
    case "bool":
      return { type, value: f.boolValue ?? false };
    case "datetime":
      return { type, value: new Date(Number(f.timeMs ?? 0)) };
    default:
      return undefined;
  }
}

/** The request of a search, checked; throws a DexError (INVALID_ARGUMENT) naming `what` and the bad option. */
export function searchRequest(query: unknown, options: SearchFlowsOptions, what: string): WireSearchFlowsRequest {
  if (typeof query !== "string") throw new DexError("INVALID_ARGUMENT", `${what}: the query must be a string ("" finds every run)`);
  if (typeof options !== "object" || options === null) throw new DexError("INVALID_ARGUMENT", `${what}: the options must be an object`);
  const pageSize: unknown = options.pageSize ?? 0;
  if (typeof pageSize !== "number" || !Number.isInteger(pageSize) || pageSize < 0 || pageSize > SEARCH_PAGE_SIZE_MAX) {
    throw new DexError(
      "INVALID_ARGUMENT",
      `${what}: pageSize must be an integer from 1 to ${SEARCH_PAGE_SIZE_MAX} (0 or unset: ${SEARCH_PAGE_SIZE_DEFAULT}), not ${String(pageSize)}`,
    );
  }
  const pageToken = options.pageToken ?? "";
  if (typeof pageToken !== "string") throw new DexError("INVALID_ARGUMENT", `${what}: pageToken must be a string (a page's nextPageToken)`);
  const given = options.fields ?? [];
  if (!Array.isArray(given)) throw new DexError("INVALID_ARGUMENT", `${what}: fields must be an array`);
  if (given.length > SEARCH_FIELDS_MAX) {
    throw new DexError("INVALID_ARGUMENT", `${what}: ${given.length} fields; at most ${SEARCH_FIELDS_MAX} may be asked for`);
  }
  const fields = given.map((f: unknown, i) => {
    if (typeof f === "string" && f !== "") return f;
    if (f instanceof Attribute) {
      if (f.index === undefined) {
        throw new DexError("INVALID_ARGUMENT", `${what}: fields[${i}] is the Attribute '${f.key}', which is not indexed`);
      }
      return f.index.key;
    }
    throw new DexError("INVALID_ARGUMENT", `${what}: fields[${i}] must be an index key, a system field or an indexed Attribute`);
  });
  return { query, pageSize, pageToken, fields: [...new Set(fields)] };
}

export function toSearchPage(r: WireSearchFlowsResponse): FlowSearchPage {
  return {
    rows: (r.rows ?? []).map((row) => new FlowSearchRow(row)),
    nextPageToken: r.nextPageToken ?? "",
    appliedSlot: Number(r.appliedSlot ?? 0),
  };
}

// ------------------------------------------------------------ query literals

/** A value searchQuery writes as a literal; an array becomes a list (for IN (...)). */
export type SearchLiteral = string | number | bigint | boolean | Date;

/**
 * `value` as a literal of the query language: a string in single quotes
 * (backslashes, quotes, newlines and tabs escaped), a number as an integer
 * (INT and DOUBLE fields) or a decimal (DOUBLE fields), a boolean TRUE or
 * FALSE, a Date as its RFC 3339 text (DATETIME fields). Throws a DexError
 * (INVALID_ARGUMENT) for anything else, NaN and the infinities, and an invalid Date.
 */
export function searchLiteral(value: SearchLiteral): string {
  switch (typeof value) {
    case "string":
      return `'${value.replace(/\\/g, "\\\\").replace(/'/g, "\\'").replace(/\n/g, "\\n").replace(/\t/g, "\\t")}'`;
    case "number":
      if (!Number.isFinite(value)) throw new DexError("INVALID_ARGUMENT", `a query has no literal for the number ${value}`);
      // Number's own text (an exponent for the very large and small), which the query language reads.
      return String(value);
    case "bigint":
      return value.toString();
    case "boolean":
      return value ? "TRUE" : "FALSE";
    default:
      if (value instanceof Date) {
        const ms = value.getTime();
        if (Number.isNaN(ms)) throw new DexError("INVALID_ARGUMENT", "a query has no literal for an invalid Date");
        const year = value.getUTCFullYear();
        // RFC 3339 has four-digit years; beyond them, the Unix milliseconds (which DATETIME fields take too).
        return year >= 0 && year <= 9999 ? `'${value.toISOString()}'` : String(ms);
      }
      throw new DexError("INVALID_ARGUMENT", `a query has no literal for ${value === null ? "null" : `a ${typeof value}`}`);
  }
}

/**
 * A tagged template that writes its values into a query as literals
 * (searchLiteral; an array as a comma-separated list), so that values from
 * users cannot change the query's shape:
 *
 *   client.searchFlows(searchQuery`Plan = ${plan} AND Tags IN (${tags}) AND StartTime > ${since}`)
 */
export function searchQuery(strings: TemplateStringsArray, ...values: (SearchLiteral | readonly SearchLiteral[])[]): string {
  let out = strings[0] ?? "";
  values.forEach((v, i) => {
    if (Array.isArray(v)) {
      if (v.length === 0) throw new DexError("INVALID_ARGUMENT", `searchQuery: value ${i + 1} is an empty list (IN needs at least one value)`);
      out += v.map((x: SearchLiteral) => searchLiteral(x)).join(", ");
    } else {
      out += searchLiteral(v as SearchLiteral);
    }
    out += strings[i + 1] ?? "";
  });
  return out;
}

// ------------------------------------------------------------ completing a query
// (the server's docs/search.md, "Completing a query"): Client.listSearchKeys and
// listSearchValues, what a query editor offers as the user types.

/** ListSearchValues' limit: the default and the most one call may ask for (src/search/completion.h). */
export const SEARCH_VALUES_DEFAULT = 20;
export const SEARCH_VALUES_MAX = 100;

/** A field a query can name. */
export interface SearchKey {
  /** As a query writes it (case-sensitive). */
  name: string;
  /** Its index type; undefined for one this SDK does not know (a newer server). */
  type: IndexTypeName | undefined;
  /** A system field (every run has it), not an index key. */
  system: boolean;
  /** It may follow ORDER BY. */
  sortable: boolean;
  /** An index key's Flow types whose live declarations declare it, sorted; [] for a system field. */
  flowTypes: string[];
}

export interface SearchKeys {
  /** The system fields in their fixed order, then the index keys in use by name. */
  keys: SearchKey[];
  /** More index keys than one answer lists (1,000). */
  truncated: boolean;
  appliedSlot: number;
}

export interface SearchValuesOptions extends CallOptions {
  /** Only values that start with this ("" or unset: from the first); at most 1 KiB. */
  prefix?: string;
  /** At most this many values: 1..100; 0 or unset: 20. */
  limit?: number;
}

export interface SearchValues {
  /** Distinct, in byte order. */
  values: string[];
  /** More values start with the prefix. */
  truncated: boolean;
  appliedSlot: number;
}

/** @internal */
export function toSearchKeys(r: WireListSearchKeysResponse): SearchKeys {
  return {
    keys: (r.keys ?? []).map((k) => ({
      name: k.name,
      type: indexTypeFromWire(k.type),
      system: k.system === true,
      sortable: k.sortable === true,
      flowTypes: [...(k.flowTypes ?? [])],
    })),
    truncated: r.truncated === true,
    appliedSlot: Number(r.appliedSlot ?? 0),
  };
}

/** @internal The request, checked before anything is sent. */
export function searchValuesRequest(key: unknown, options: SearchValuesOptions): { key: string; prefix: string; limit: number } {
  if (typeof key !== "string" || key === "") {
    throw new DexError("INVALID_ARGUMENT", "listSearchValues: the key must be a non-empty string (a KEYWORD or KEYWORD_ARRAY field)");
  }
  const prefix = options.prefix ?? "";
  if (typeof prefix !== "string") throw new DexError("INVALID_ARGUMENT", "listSearchValues: prefix must be a string");
  const limit = options.limit ?? 0;
  if (!Number.isInteger(limit) || limit < 0 || limit > SEARCH_VALUES_MAX) {
    throw new DexError("INVALID_ARGUMENT", `listSearchValues: limit must be an integer from 0 (the default, ${SEARCH_VALUES_DEFAULT}) to ${SEARCH_VALUES_MAX}, not ${String(limit)}`);
  }
  return { key, prefix, limit };
}

/** @internal */
export function toSearchValues(r: WireListSearchValuesResponse): SearchValues {
  return { values: [...(r.values ?? [])], truncated: r.truncated === true, appliedSlot: Number(r.appliedSlot ?? 0) };
}
