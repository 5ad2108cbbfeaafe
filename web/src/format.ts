// How dex-web prints the API's values: times, durations, Payloads, Attribute values, statuses.
import type { AttributeValue, FlowStatus, Payload, SearchField } from "./api/types";

/** Unix milliseconds (an int64 string) as UTC "2026-12-05 09:00:40.123"; "" for 0 (unset). */
export function formatTime(ms: string | number | undefined): string {
  const n = Number(ms ?? 0);
  if (!n) return "";
  return new Date(n).toISOString().replace("T", " ").replace("Z", "");
}

/** A duration in milliseconds, as "850 ms", "12.3 s", "4 min 5 s", "2 h 3 min", "3 d 4 h". */
export function formatDuration(ms: number): string {
  if (ms < 0 || !Number.isFinite(ms)) return "";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${Math.floor(s % 60)} s`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${h} h ${m % 60} min`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}

/** A run's duration: close - start, or "running for" now - start while it runs. */
export function runDuration(startMs: string, closeMs: string, now = Date.now()): string {
  const start = Number(startMs);
  if (!start) return "";
  const close = Number(closeMs);
  return close ? formatDuration(close - start) : formatDuration(now - start);
}

function base64ToText(b64: string): string {
  const bin = atob(b64);
  const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
  return new TextDecoder("utf-8", { fatal: false }).decode(bytes);
}

/** A JSON text pretty-printed, or the text as it is when it is not JSON. */
export function prettyJson(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/** A Payload's bytes as text (the SDKs write JSON), pretty-printed when it is JSON. */
export function payloadText(p: Payload | undefined): string {
  if (!p) return "";
  if (p.blob && !p.data) return `(a blob of ${p.blob.sizeBytes} bytes)`;
  if (!p.data) return "";
  return prettyJson(base64ToText(p.data));
}

export function attributeValueText(v: AttributeValue | undefined): string {
  if (!v) return "(no value)";
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.int64Value !== undefined) return v.int64Value;
  if (v.doubleValue !== undefined) return String(v.doubleValue);
  if (v.boolValue !== undefined) return String(v.boolValue);
  if (v.datetimeUnixMs !== undefined) return `${formatTime(v.datetimeUnixMs)} UTC`;
  if (v.jsonValue !== undefined) return prettyJson(v.jsonValue);
  if (v.bytesValue !== undefined) return `(${atob(v.bytesValue).length} bytes)`;
  if (v.blob) return `(a blob of ${v.blob.sizeBytes} bytes)`;
  return "(no value)";
}

export function attributeValueType(v: AttributeValue | undefined): string {
  if (!v) return "";
  const names: [keyof AttributeValue, string][] = [
    ["stringValue", "string"],
    ["int64Value", "int64"],
    ["doubleValue", "double"],
    ["boolValue", "bool"],
    ["datetimeUnixMs", "datetime"],
    ["jsonValue", "json"],
    ["bytesValue", "bytes"],
  ];
  return names.find(([k]) => v[k] !== undefined)?.[1] ?? "";
}

export function searchFieldText(f: SearchField): string {
  switch (f.type) {
    case "INDEX_KEYWORD":
    case "INDEX_FULL_TEXT":
      return f.text;
    case "INDEX_KEYWORD_ARRAY":
      return f.items.join(", ");
    case "INDEX_INT":
      return f.intValue;
    case "INDEX_DOUBLE":
      return String(f.doubleValue);
    case "INDEX_BOOL":
      return String(f.boolValue);
    case "INDEX_DATETIME":
      return formatTime(f.timeMs);
    default:
      return "";
  }
}

/** "FLOW_RUNNING" -> "RUNNING". */
export function statusName(s: FlowStatus | string): string {
  return s.replace(/^FLOW_/, "");
}

export function statusColor(s: FlowStatus | string): string {
  switch (statusName(s)) {
    case "RUNNING":
      return "blue";
    case "COMPLETED":
      return "green";
    case "FAILED":
    case "TIMED_OUT":
      return "red";
    case "CANCELED":
    case "TERMINATED":
      return "orange";
    case "CONTINUED_AS_NEW":
      return "grape";
    default:
      return "gray";
  }
}

/** A prefix-less enum name: "PHASE_WAITING" -> "WAITING", "TASK_QUEUED" -> "QUEUED"; "" when unset. */
export function enumName(value: string, prefix: string): string {
  if (value === undefined || value === null || value.endsWith("UNSPECIFIED")) return "";
  return value.startsWith(prefix) ? value.slice(prefix.length) : value;
}

export function runPath(flowId: string, runId: string): string {
  return `/flows/${encodeURIComponent(flowId)}/runs/${encodeURIComponent(runId)}`;
}
