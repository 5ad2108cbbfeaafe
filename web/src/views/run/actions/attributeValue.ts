// An Attribute's value as the form holds it (a type and a text) and as the API takes it: the
// AttributeValue oneof in proto3 JSON. Numbers and times are checked here; a JSON value is sent as
// typed, so the server judges it (and says what is wrong).
import type { AttributeValue } from "../../../api/types";
import { InputError, textToBase64 } from "./encode";

export const attributeTypes = ["string", "int64", "double", "bool", "datetime", "json", "bytes"] as const;
export type AttributeType = (typeof attributeTypes)[number];

export const attributeTypeLabels: Record<AttributeType, string> = {
  string: "string",
  int64: "int64",
  double: "double",
  bool: "bool",
  datetime: "datetime (UTC)",
  json: "JSON",
  bytes: "bytes",
};

/** "2027-01-15T10:00:00Z", "2027-01-15 10:00:00" (UTC) or Unix milliseconds, as Unix ms. */
export function parseDatetime(text: string): string {
  const t = text.trim();
  if (/^-?\d+$/.test(t)) return t;
  const iso = t.replace(" ", "T");
  const ms = Date.parse(/[zZ]|[+-]\d\d:?\d\d$/.test(iso) ? iso : `${iso}Z`);
  if (Number.isNaN(ms)) throw new InputError(`"${t}" is not a time: write e.g. 2027-01-15T10:00:00Z or Unix milliseconds`);
  return String(ms);
}

export function toAttributeValue(type: AttributeType, text: string): AttributeValue {
  switch (type) {
    case "string":
      return { stringValue: text };
    case "int64":
      if (!/^-?\d+$/.test(text.trim())) throw new InputError(`"${text}" is not an integer`);
      return { int64Value: text.trim() };
    case "double": {
      const n = Number(text.trim());
      if (text.trim() === "" || Number.isNaN(n)) throw new InputError(`"${text}" is not a number`);
      return { doubleValue: n };
    }
    case "bool":
      return { boolValue: text === "true" };
    case "datetime":
      return { datetimeUnixMs: parseDatetime(text) };
    case "json":
      return { jsonValue: text };
    case "bytes":
      return { bytesValue: textToBase64(text) };
  }
}
