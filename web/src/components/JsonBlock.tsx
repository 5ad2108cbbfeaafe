// Values as text: pretty JSON (or text) in a scrollable block, a Payload decoded, or a value inline.
// A text longer than `truncateAt` characters (4 KiB) shows its beginning, its whole size and a
// "Show all (N KiB)" button that shows the rest; a large Payload is decoded and pretty-printed
// only when it is shown whole, so a page with large values draws as fast as one without.
import { useMemo, useState, type ReactNode } from "react";
import { Button, Code, Group, Text } from "@mantine/core";
import type { Payload } from "../api/types";
import { prettyJson } from "../format";

/** The characters of a value shown before "Show all". */
export const truncateAt = 4096;

/** A size in bytes as "812 bytes", "4.0 KiB", "1.5 MiB". */
export function sizeText(bytes: number): string {
  if (bytes < 1024) return `${bytes} bytes`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

const utf8Size = (text: string) => new TextEncoder().encode(text).length;

function decode(b64: string): string {
  const bin = atob(b64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return new TextDecoder("utf-8", { fatal: false }).decode(bytes);
}

/** The number of bytes base64 text encodes. */
function base64Size(b64: string): number {
  const pad = b64.endsWith("==") ? 2 : b64.endsWith("=") ? 1 : 0;
  return (b64.length / 4) * 3 - pad;
}

/** What a truncatable view shows: the text (or its beginning) and, when cut, the whole one on request. */
interface Source {
  /** The text shown while truncated: at most `truncateAt` characters. */
  head: string;
  /** The whole text, computed when asked for (undefined: `head` is the whole). */
  whole?: () => string;
  /** The whole value's size in bytes (when cut). */
  bytes: number;
}

function textSource(text: string): Source {
  if (text.length <= truncateAt) return { head: text, bytes: 0 };
  return { head: text.slice(0, truncateAt), whole: () => text, bytes: utf8Size(text) };
}

/** A Payload's text: pretty JSON when small; a large one's first bytes as written, until shown whole. */
function payloadSource(p: Payload | undefined, empty: string): Source {
  if (!p) return { head: empty, bytes: 0 };
  if (p.blob && !p.data) return { head: `(a blob of ${sizeText(Number(p.blob.sizeBytes))}, not read)`, bytes: 0 };
  if (!p.data) return { head: empty, bytes: 0 };
  const bytes = base64Size(p.data);
  if (bytes <= truncateAt) return textSource(prettyJson(decode(p.data)));
  // The beginning, decoded from the first bytes (a character cut at the end shows as U+FFFD).
  const head = decode(p.data.slice(0, Math.ceil((truncateAt + 4) / 3) * 4)).slice(0, truncateAt);
  const data = p.data;
  return { head, whole: () => prettyJson(decode(data)), bytes };
}

function Truncatable({
  source,
  label,
  render,
}: {
  source: Source;
  label?: string;
  render: (text: string) => ReactNode;
}) {
  const [all, setAll] = useState(false);
  const whole = useMemo(() => (all && source.whole ? source.whole() : undefined), [all, source]);
  if (!source.whole) return render(source.head);
  const size = sizeText(source.bytes);
  return (
    <div data-testid="truncated-value" data-truncated={whole === undefined ? "true" : "false"} data-bytes={source.bytes}>
      {render(whole ?? `${source.head}…`)}
      <Group gap="xs" mt={4}>
        <Text size="xs" c="dimmed" data-testid="truncated-note">
          {whole === undefined ? `The first ${sizeText(truncateAt)} of ${size} shown.` : `All ${size} shown.`}
        </Text>
        <Button
          size="compact-xs"
          variant="light"
          aria-label={`${whole === undefined ? `Show all (${size})` : "Show less"} of ${label ?? "the value"}`}
          aria-expanded={whole !== undefined}
          onClick={() => setAll((a) => !a)}
        >
          {whole === undefined ? `Show all (${size})` : "Show less"}
        </Button>
      </Group>
    </div>
  );
}

function Block({ text, label }: { text: string; label?: string }) {
  return (
    // tabIndex: a block that scrolls can be scrolled from the keyboard.
    <Code block tabIndex={0} aria-label={label} style={{ maxHeight: 320, overflow: "auto", whiteSpace: "pre-wrap", overflowWrap: "anywhere" }}>
      {text}
    </Code>
  );
}

/** A value shown as pretty JSON (or text) in a scrollable block; a long one truncated. */
export function JsonBlock({ value, label }: { value: unknown; label?: string }) {
  const source = useMemo(() => textSource(typeof value === "string" ? value : JSON.stringify(value, null, 2)), [value]);
  return <Truncatable source={source} label={label} render={(t) => <Block text={t} label={label} />} />;
}

/** A Payload decoded as text (pretty JSON) in a scrollable block; a long one truncated. */
export function PayloadBlock({ payload, label, empty = "" }: { payload: Payload | undefined; label?: string; empty?: string }) {
  const source = useMemo(() => payloadSource(payload, empty), [payload, empty]);
  return <Truncatable source={source} label={label} render={(t) => <Block text={t} label={label} />} />;
}

/** A text inline (monospace, its line breaks kept); a long one truncated, and scrolled past 12 lines or so. */
export function LongText({ text, label, size = "sm" }: { text: string; label?: string; size?: "xs" | "sm" }) {
  const source = useMemo(() => textSource(text), [text]);
  return (
    <Truncatable
      source={source}
      label={label}
      render={(t) =>
        t.length > 600 ? (
          // tabIndex: a block that scrolls can be scrolled from the keyboard.
          <Text size={size} ff="monospace" tabIndex={0} aria-label={label} style={{ whiteSpace: "pre-wrap", overflowWrap: "anywhere", maxHeight: 240, overflow: "auto" }}>
            {t}
          </Text>
        ) : (
          <Text size={size} ff="monospace" style={{ whiteSpace: "pre-wrap", overflowWrap: "anywhere" }}>
            {t}
          </Text>
        )
      }
    />
  );
}

/** A Payload inline (monospace); a long one truncated. */
export function PayloadText({ payload, label, size = "sm" }: { payload: Payload | undefined; label?: string; size?: "xs" | "sm" }) {
  const source = useMemo(() => payloadSource(payload, ""), [payload]);
  return (
    <Truncatable
      source={source}
      label={label}
      render={(t) => (
        <Text size={size} ff="monospace" style={{ whiteSpace: "pre-wrap", overflowWrap: "anywhere" }} span>
          {t}
        </Text>
      )}
    />
  );
}
