// Completion in the query box (docs/search.md, "Completing a query"): which token the cursor is in
// and what may come there, by the query language's grammar (src/search/query_parser.cc):
//
//   query     := [ expr ] [ ORDER BY field [ ASC | DESC ] ]
//   expr      := term { OR term };  term := factor { AND factor }
//   factor    := NOT factor | '(' expr ')' | predicate
//   predicate := field op literal | field [NOT] IN '(' literal {, literal} ')'
//              | field [NOT] BETWEEN literal AND literal | field STARTS_WITH string
//              | field IS [NOT] NULL
//
// Pure: no React, no fetch. `complete` answers the range of text a suggestion replaces, the
// suggestions it knows by itself (fields, operators for the field's type, keywords, statuses,
// booleans, instants) and, for a KEYWORD field, which values to ask the server for
// (ListSearchValues); `valueSuggestions` turns the server's answer into suggestions, and
// `applySuggestion` puts one into the text.

/** A field a query can name, as ListSearchKeys answers it (types without the INDEX_ prefix). */
export interface FieldInfo {
  name: string;
  type: string; // "KEYWORD", "FULL_TEXT", "KEYWORD_ARRAY", "INT", "DOUBLE", "BOOL", "DATETIME"
  system: boolean;
  sortable: boolean;
  flowTypes: string[];
}

export type SuggestionKind = "field" | "operator" | "keyword" | "value";

export interface Suggestion {
  label: string; // what the list shows
  insert: string; // what goes into the query
  kind: SuggestionKind;
  detail?: string; // e.g. a field's type and Flow types
}

export interface Completion {
  from: number; // the replaced range [from, to) of the text
  to: number;
  prefix: string; // what the user typed of the token (a string's content, unquoted)
  expect: "field" | "operator" | "keyword" | "value" | "none";
  field?: FieldInfo; // the predicate's field, when a value or an operator is expected
  suggestions: Suggestion[];
  /** A KEYWORD field's values to ask the server for (ListSearchValues), when a value is expected. */
  fetchValues?: { key: string; prefix: string };
}

/** The system fields (docs/search.md), for when ListSearchKeys has not answered. */
export const systemFields: FieldInfo[] = (
  [
    ["FlowId", "KEYWORD", true],
    ["RunId", "KEYWORD", true],
    ["FlowType", "KEYWORD", true],
    ["Status", "KEYWORD", true],
    ["StartTime", "DATETIME", true],
    ["CloseTime", "DATETIME", true],
    ["ExecutionDuration", "INT", true],
    ["ParentFlowId", "KEYWORD", true],
    ["ActiveStepTypes", "KEYWORD_ARRAY", false],
  ] as const
).map(([name, type, sortable]) => ({ name, type, system: true, sortable, flowTypes: [] }));

export const statuses = ["RUNNING", "COMPLETED", "FAILED", "CANCELED", "TERMINATED", "TIMED_OUT", "CONTINUED_AS_NEW"];

const keywords = new Set([
  "AND", "OR", "NOT", "IN", "BETWEEN", "STARTS_WITH", "IS", "NULL", "ORDER", "BY", "ASC", "DESC", "TRUE", "FALSE",
]);

/** A string literal of the query language: single quotes, with \ and ' escaped. */
export function quoteLiteral(s: string): string {
  return `'${s.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;
}

const isWordStart = (c: string) => /[A-Za-z_]/.test(c);
const isWordChar = (c: string) => /[A-Za-z0-9_.-]/.test(c);

/** A field name as a query writes it: plain, or in backticks when not a plain word or a keyword. */
export function fieldText(name: string): string {
  const plain = name.length > 0 && isWordStart(name[0]) && [...name].every(isWordChar);
  if (plain && !keywords.has(name.toUpperCase())) return name;
  return "`" + name.replace(/`/g, "``") + "`";
}

type TokKind = "word" | "field" | "string" | "number" | "op" | "lparen" | "rparen" | "comma" | "other";
interface Tok {
  kind: TokKind;
  text: string; // a word's text, a field's name, a string's content, an operator
  start: number;
  end: number;
  closed: boolean; // a string or backquoted field with its closing quote
}

/** The tokens of `text` (lenient: an unterminated string or name runs to the end). */
export function tokenize(text: string): Tok[] {
  const out: Tok[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    const start = i;
    if (c === "'" || c === '"' || c === "`") {
      let value = "";
      let closed = false;
      i++;
      while (i < text.length) {
        const d = text[i];
        if (c === "`" && d === "`") {
          if (text[i + 1] === "`") {
            value += "`";
            i += 2;
            continue;
          }
          closed = true;
          i++;
          break;
        }
        if (c !== "`" && d === "\\" && i + 1 < text.length) {
          const e = text[i + 1];
          value += e === "n" ? "\n" : e === "t" ? "\t" : e;
          i += 2;
          continue;
        }
        if (c !== "`" && d === c) {
          closed = true;
          i++;
          break;
        }
        value += d;
        i++;
      }
      out.push({ kind: c === "`" ? "field" : "string", text: value, start, end: i, closed });
      continue;
    }
    if (isWordStart(c)) {
      while (i < text.length && isWordChar(text[i])) i++;
      out.push({ kind: "word", text: text.slice(start, i), start, end: i, closed: true });
      continue;
    }
    if (/[0-9]/.test(c) || (c === "-" && /[0-9]/.test(text[i + 1] ?? ""))) {
      i++;
      while (i < text.length && /[0-9.eE+-]/.test(text[i])) i++;
      out.push({ kind: "number", text: text.slice(start, i), start, end: i, closed: true });
      continue;
    }
    const two = text.slice(i, i + 2);
    if (two === "!=" || two === "<>" || two === "<=" || two === ">=") {
      i += 2;
      out.push({ kind: "op", text: two, start, end: i, closed: true });
      continue;
    }
    i++;
    const kind: TokKind =
      c === "=" || c === "<" || c === ">" ? "op" : c === "(" ? "lparen" : c === ")" ? "rparen" : c === "," ? "comma" : "other";
    out.push({ kind, text: c, start, end: i, closed: true });
  }
  return out;
}

// Where the grammar stands after a sequence of complete tokens.
type State =
  | { s: "field" } // a field, NOT or '('
  | { s: "op"; field: string } // after a field
  | { s: "not-op"; field: string } // after field NOT: IN or BETWEEN
  | { s: "is"; field: string } // after IS: NULL or NOT NULL
  | { s: "is-not"; field: string }
  | { s: "value"; field: string; then: "end" | "in" | "between-and" }
  | { s: "in-open"; field: string } // after IN: '('
  | { s: "in-next"; field: string } // after a value of an IN list: ',' or ')'
  | { s: "between-and"; field: string } // after BETWEEN's low bound: AND
  | { s: "after" } // after a predicate: AND, OR, ')', ORDER BY
  | { s: "by" } // after ORDER
  | { s: "order-field" }
  | { s: "order-dir" }
  | { s: "end" }
  | { s: "lost" }; // not a query the grammar knows: no suggestions

const kw = (t: Tok, word: string) => t.kind === "word" && t.text.toUpperCase() === word;
const isLiteral = (t: Tok) =>
  t.kind === "string" || t.kind === "number" || kw(t, "TRUE") || kw(t, "FALSE");

function step(state: State, t: Tok): State {
  const fieldName = (): string | undefined =>
    t.kind === "field" ? t.text : t.kind === "word" && !keywords.has(t.text.toUpperCase()) ? t.text : undefined;
  switch (state.s) {
    case "field": {
      if (kw(t, "NOT") || t.kind === "lparen") return state;
      const f = fieldName();
      return f !== undefined ? { s: "op", field: f } : { s: "lost" };
    }
    case "op":
      if (t.kind === "op" || kw(t, "STARTS_WITH")) return { s: "value", field: state.field, then: "end" };
      if (kw(t, "IN")) return { s: "in-open", field: state.field };
      if (kw(t, "BETWEEN")) return { s: "value", field: state.field, then: "between-and" };
      if (kw(t, "NOT")) return { s: "not-op", field: state.field };
      if (kw(t, "IS")) return { s: "is", field: state.field };
      return { s: "lost" };
    case "not-op":
      if (kw(t, "IN")) return { s: "in-open", field: state.field };
      if (kw(t, "BETWEEN")) return { s: "value", field: state.field, then: "between-and" };
      return { s: "lost" };
    case "is":
      if (kw(t, "NULL")) return { s: "after" };
      if (kw(t, "NOT")) return { s: "is-not", field: state.field };
      return { s: "lost" };
    case "is-not":
      return kw(t, "NULL") ? { s: "after" } : { s: "lost" };
    case "value":
      if (!isLiteral(t)) return { s: "lost" };
      if (state.then === "in") return { s: "in-next", field: state.field };
      if (state.then === "between-and") return { s: "between-and", field: state.field };
      return { s: "after" };
    case "in-open":
      return t.kind === "lparen" ? { s: "value", field: state.field, then: "in" } : { s: "lost" };
    case "in-next":
      if (t.kind === "comma") return { s: "value", field: state.field, then: "in" };
      if (t.kind === "rparen") return { s: "after" };
      return { s: "lost" };
    case "between-and":
      return kw(t, "AND") ? { s: "value", field: state.field, then: "end" } : { s: "lost" };
    case "after":
      if (kw(t, "AND") || kw(t, "OR")) return { s: "field" };
      if (t.kind === "rparen") return state;
      if (kw(t, "ORDER")) return { s: "by" };
      return { s: "lost" };
    case "by":
      return kw(t, "BY") ? { s: "order-field" } : { s: "lost" };
    case "order-field":
      return fieldName() !== undefined ? { s: "order-dir" } : { s: "lost" };
    case "order-dir":
      return kw(t, "ASC") || kw(t, "DESC") ? { s: "end" } : { s: "lost" };
    default:
      return { s: "lost" };
  }
}

const ordered = (type: string) => type === "KEYWORD" || type === "INT" || type === "DOUBLE" || type === "DATETIME";

/** The operators that apply to a field of `type` (src/search/compile.cc's check). */
export function operatorsFor(type: string): string[] {
  const ops = ["=", "!="];
  if (ordered(type)) ops.push("<", "<=", ">", ">=");
  ops.push("IN", "NOT IN");
  if (ordered(type)) ops.push("BETWEEN", "NOT BETWEEN");
  if (type === "KEYWORD" || type === "KEYWORD_ARRAY" || type === "FULL_TEXT") ops.push("STARTS_WITH");
  ops.push("IS NULL", "IS NOT NULL");
  return ops;
}

const startsWithFold = (s: string, prefix: string) => s.toLowerCase().startsWith(prefix.toLowerCase());

function keywordSuggestions(words: string[], prefix: string): Suggestion[] {
  return words
    .filter((w) => startsWithFold(w, prefix))
    .map((w) => ({ label: w, insert: w, kind: w === ")" || w === "," ? "operator" : "keyword" }));
}

function fieldSuggestions(fields: FieldInfo[], prefix: string, sortableOnly: boolean): Suggestion[] {
  const matching = fields.filter((f) => (!sortableOnly || f.sortable) && startsWithFold(f.name, prefix));
  // Those that match the typed case first, then the index keys before the system fields' order.
  const exact = matching.filter((f) => f.name.startsWith(prefix));
  const rest = matching.filter((f) => !f.name.startsWith(prefix));
  return [...exact, ...rest].map((f) => ({
    label: f.name,
    insert: fieldText(f.name),
    kind: "field" as const,
    detail:
      f.type + (f.system ? " · system field" : f.flowTypes.length > 0 ? ` · ${f.flowTypes.join(", ")}` : ""),
  }));
}

/** A value's suggestion: a quoted string literal. */
export function valueSuggestion(value: string, detail?: string): Suggestion {
  return { label: value, insert: quoteLiteral(value), kind: "value", detail };
}

/** The server's values (ListSearchValues) for a completion, the typed prefix matched exactly. */
export function valueSuggestions(c: Completion, values: string[]): Suggestion[] {
  const known = new Set(c.suggestions.map((s) => s.label));
  return values
    .filter((v) => v.startsWith(c.prefix) && !known.has(v))
    .map((v) => valueSuggestion(v, c.field?.type));
}

/**
 * What may go at `cursor` in `text`: the range to replace and the suggestions. `fields`: the
 * system fields and index keys (ListSearchKeys); `nowMs`: the instant DATETIME values are offered
 * relative to.
 */
export function complete(text: string, cursor: number, fields: FieldInfo[], nowMs = Date.now()): Completion {
  const toks = tokenize(text.slice(0, cursor));
  // The token being typed: a word, a number or an unterminated string or name that ends at the cursor.
  let partial: Tok | undefined = toks[toks.length - 1];
  if (
    partial === undefined ||
    partial.end !== cursor ||
    !(partial.kind === "word" || partial.kind === "number" || !partial.closed)
  )
    partial = undefined;
  const before = partial ? toks.slice(0, -1) : toks;
  let state: State = { s: "field" };
  let depth = 0; // open parentheses (an IN list's close too)
  for (const t of before) {
    state = step(state, t);
    depth += t.kind === "lparen" ? 1 : t.kind === "rparen" ? -1 : 0;
  }

  const from = partial ? partial.start : cursor;
  // A word being typed also replaces its characters after the cursor.
  let to = cursor;
  if (partial?.kind === "word") while (to < text.length && isWordChar(text[to])) to++;
  const prefix = partial ? partial.text : "";
  const base = { from, to, prefix };
  const none: Completion = { ...base, expect: "none", suggestions: [] };
  const byName = (name: string) => fields.find((f) => f.name === name);

  switch (state.s) {
    case "field": {
      if (partial && partial.kind !== "word" && partial.kind !== "field") return none;
      const out = fieldSuggestions(fields, prefix, false);
      if (partial?.kind !== "field") out.push(...keywordSuggestions(["NOT", "("], prefix));
      return { ...base, expect: "field", suggestions: out };
    }
    case "order-field":
      if (partial && partial.kind !== "word" && partial.kind !== "field") return none;
      return { ...base, expect: "field", suggestions: fieldSuggestions(fields, prefix, true) };
    case "op": {
      if (partial && partial.kind !== "word") return none;
      const field = byName(state.field);
      const ops = field ? operatorsFor(field.type) : ["=", "!=", "IN", "NOT IN", "IS NULL", "IS NOT NULL"];
      const suggestions = ops
        .filter((o) => startsWithFold(o, prefix))
        .map((o) => ({ label: o, insert: o === "IN" || o === "NOT IN" ? `${o} (` : o, kind: "operator" as const }));
      return { ...base, expect: "operator", field, suggestions };
    }
    case "not-op":
      return { ...base, expect: "operator", suggestions: keywordSuggestions(["IN", "BETWEEN"], prefix) };
    case "is":
      return { ...base, expect: "keyword", suggestions: keywordSuggestions(["NULL", "NOT NULL"], prefix) };
    case "is-not":
      return { ...base, expect: "keyword", suggestions: keywordSuggestions(["NULL"], prefix) };
    case "in-open":
      return partial ? none : { ...base, expect: "keyword", suggestions: keywordSuggestions(["("], "") };
    case "in-next":
      return partial ? none : { ...base, expect: "keyword", suggestions: keywordSuggestions([",", ")"], "") };
    case "between-and":
      return { ...base, expect: "keyword", suggestions: keywordSuggestions(["AND"], prefix) };
    case "after":
      return {
        ...base,
        expect: "keyword",
        suggestions: keywordSuggestions(depth > 0 ? ["AND", "OR", ")"] : ["AND", "OR", "ORDER BY"], prefix),
      };
    case "by":
      return { ...base, expect: "keyword", suggestions: keywordSuggestions(["BY"], prefix) };
    case "order-dir":
      return { ...base, expect: "keyword", suggestions: keywordSuggestions(["ASC", "DESC"], prefix) };
    case "value": {
      const field = byName(state.field);
      if (field === undefined) return none;
      const suggestions: Suggestion[] = [];
      let fetchValues: Completion["fetchValues"];
      if (field.name === "Status") {
        suggestions.push(...statuses.filter((s) => startsWithFold(s, prefix)).map((s) => valueSuggestion(s, "status")));
      } else if (field.type === "BOOL") {
        suggestions.push(...keywordSuggestions(["true", "false"], prefix).map((s) => ({ ...s, kind: "value" as const })));
      } else if (field.type === "DATETIME") {
        const at = (ms: number, what: string) => valueSuggestion(new Date(ms).toISOString(), what);
        if (prefix === "")
          suggestions.push(at(nowMs, "now"), at(nowMs - 3600_000, "an hour ago"), at(nowMs - 86_400_000, "a day ago"));
      } else if ((field.type === "KEYWORD" || field.type === "KEYWORD_ARRAY") && field.name !== "RunId") {
        if (partial === undefined || partial.kind === "string" || partial.kind === "word")
          fetchValues = { key: field.name, prefix };
      }
      return { ...base, expect: "value", field, suggestions, fetchValues };
    }
    default:
      return none;
  }
}

/** The text with `s` in place of the completion's range, and where the cursor goes after it. */
export function applySuggestion(text: string, c: Completion, s: Suggestion): { text: string; cursor: number } {
  const head = text.slice(0, c.from);
  // A space between it and the token before (none after an opening parenthesis).
  const gap = head.length > 0 && !/[\s(]$/.test(head) && s.insert !== ")" && s.insert !== "," ? " " : "";
  const open = s.insert.endsWith("(");
  const inserted = gap + s.insert + (open ? "" : " ");
  const tail = text.slice(c.to).replace(/^\s+/, "");
  return { text: head + inserted + tail, cursor: head.length + inserted.length };
}
