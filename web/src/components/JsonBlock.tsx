import { Code } from "@mantine/core";

/** A value shown as pretty JSON (or text) in a scrollable block. */
export function JsonBlock({ value, label }: { value: unknown; label?: string }) {
  const text = typeof value === "string" ? value : JSON.stringify(value, null, 2);
  return (
    // tabIndex: a block that scrolls can be scrolled from the keyboard.
    <Code block tabIndex={0} aria-label={label} style={{ maxHeight: 320, overflow: "auto", whiteSpace: "pre-wrap" }}>
      {text}
    </Code>
  );
}
