// How the actions write the API's values: Payload bytes (base64 of the JSON text the SDKs read),
// JSON checked before it is sent, and a request ID per write.

/** Text as base64 of its UTF-8 bytes (proto3 JSON's `bytes`). */
export function textToBase64(text: string): string {
  const bytes = new TextEncoder().encode(text);
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin);
}

export function base64ToText(b64: string): string {
  const bin = atob(b64);
  return new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0)));
}

/** A value the form holds that cannot be sent: said before anything goes out. */
export class InputError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "InputError";
  }
}

/** A JSON text as a Payload (base64 of the text); `what` names the field in the error. */
export function jsonPayload(text: string, what: string): { data: string } {
  const t = text.trim();
  try {
    JSON.parse(t);
  } catch (e) {
    throw new InputError(`${what} is not JSON: ${e instanceof Error ? e.message : String(e)}`);
  }
  return { data: textToBase64(t) };
}

/** A fresh request ID: crypto.randomUUID where the page is a secure context, else a v4 UUID by hand. */
export function newRequestId(): string {
  if (typeof crypto.randomUUID === "function") return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** A text input's field (not its label) in the theme's monospace font: for JSON. */
export const mono = { input: { fontFamily: "var(--mantine-font-family-monospace)" } };
