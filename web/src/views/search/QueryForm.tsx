// The query box: the SearchFlows query language (docs/search.md); Enter or the button searches.
// As the user types it offers what may come at the cursor (completion.ts): the system fields and
// the index keys in use (ListSearchKeys), the operators of the field's type, keywords, and values
// (statuses, booleans, instants, and a KEYWORD field's values from ListSearchValues). Arrow keys
// pick a suggestion, Enter accepts it, Escape closes the list; Enter with none picked searches.
import { useEffect, useRef, useState } from "react";
import { flushSync } from "react-dom";
import { Button, Combobox, Group, Text, TextInput, useCombobox } from "@mantine/core";
import { listSearchKeys, listSearchValues } from "../../api/calls";
import type { SearchKeyInfo } from "../../api/types";
import {
  applySuggestion,
  complete,
  systemFields,
  valueSuggestions,
  type Completion,
  type FieldInfo,
  type Suggestion,
} from "./completion";

const fieldInfo = (k: SearchKeyInfo): FieldInfo => ({
  name: k.name,
  type: k.type.replace(/^INDEX_/, ""),
  system: k.system,
  sortable: k.sortable,
  flowTypes: k.flowTypes ?? [],
});

// The index keys in use change only with declarations: read again at most this often, on focus.
const keysMaxAgeMs = 10_000;
const valuesLimit = 20;
const optionId = (i: number) => `query-suggestion-${i}`;

export function QueryForm({ query, onSearch }: { query: string; onSearch: (q: string) => void }) {
  const [draft, setDraft] = useState(query);
  useEffect(() => setDraft(query), [query]);
  const inputRef = useRef<HTMLInputElement>(null);
  const combobox = useCombobox({ onDropdownClose: () => combobox.resetSelectedOption() });

  const [fields, setFields] = useState<FieldInfo[]>(systemFields);
  const keysReadAt = useRef(0);
  const readKeys = () => {
    if (Date.now() - keysReadAt.current < keysMaxAgeMs) return;
    keysReadAt.current = Date.now();
    listSearchKeys()
      .then((r) => setFields(r.keys.map(fieldInfo)))
      .catch(() => undefined); // the system fields still complete
  };
  useEffect(readKeys, []);

  const [completion, setCompletion] = useState<Completion>();
  // The picked suggestion, for aria-activedescendant: ours, since the list changes under the
  // combobox as the user types and its own would then name an option that is gone.
  const [active, setActive] = useState(-1);
  const [values, setValues] = useState<{ key: string; prefix: string; values: string[] }>();

  // A KEYWORD field's values by the typed prefix, a moment after the typing stops.
  const fetchKey = completion?.fetchValues?.key;
  const fetchPrefix = completion?.fetchValues?.prefix;
  useEffect(() => {
    if (fetchKey === undefined || fetchPrefix === undefined) return;
    const ctl = new AbortController();
    const timer = setTimeout(() => {
      listSearchValues({ key: fetchKey, prefix: fetchPrefix, limit: valuesLimit }, ctl.signal)
        .then((r) => {
          if (!ctl.signal.aborted) setValues({ key: fetchKey, prefix: fetchPrefix, values: r.values });
        })
        .catch(() => undefined);
    }, 100);
    return () => {
      clearTimeout(timer);
      ctl.abort();
    };
  }, [fetchKey, fetchPrefix]);

  const items: Suggestion[] = completion ? [...completion.suggestions] : [];
  if (completion?.fetchValues && values?.key === completion.fetchValues.key) {
    // The answer for this prefix, or for a shorter one while the newer call runs.
    if (completion.fetchValues.prefix.startsWith(values.prefix)) items.push(...valueSuggestions(completion, values.values));
  }

  const update = (text: string, cursor: number) => {
    const c = complete(text, cursor, fields);
    setCompletion(c);
    combobox.resetSelectedOption();
    setActive(-1);
    if (c.suggestions.length > 0 || c.fetchValues) combobox.openDropdown();
    else combobox.closeDropdown();
  };

  const accept = (index: number) => {
    const input = inputRef.current;
    const s = items[index];
    if (!completion || !s || !input) return;
    const next = applySuggestion(draft, completion, s);
    // The new text in the input now, so that the cursor is placed before the next key arrives.
    flushSync(() => {
      setDraft(next.text);
      update(next.text, next.cursor);
    });
    input.focus();
    input.setSelectionRange(next.cursor, next.cursor);
  };

  return (
    <form
      role="search"
      onSubmit={(e) => {
        e.preventDefault();
        combobox.closeDropdown();
        onSearch(draft.trim());
      }}
    >
      <Group align="flex-end" wrap="nowrap">
        <Combobox store={combobox} onOptionSubmit={(v) => accept(Number(v))} withinPortal={false}>
          <Combobox.Target
            withExpandedAttribute
            {...{ "aria-activedescendant": combobox.dropdownOpened && active >= 0 ? optionId(active) : undefined }}
          >
            <TextInput
              ref={inputRef}
              style={{ flex: 1 }}
              label="Query"
              name="q"
              placeholder="e.g. FlowType = 'OrderProcessing' AND Status = 'RUNNING'"
              description={
                <Text span size="xs">
                  System fields (FlowId, RunId, FlowType, Status, StartTime, CloseTime, ExecutionDuration,
                  ParentFlowId, ActiveStepTypes) and indexed Attributes; AND, OR, NOT, IN, BETWEEN,
                  STARTS_WITH, IS NULL, ORDER BY. Empty: every run, newest first. Suggestions as you type:
                  arrow keys pick, Enter accepts, Escape closes.
                </Text>
              }
              value={draft}
              onChange={(e) => {
                const el = e.currentTarget;
                setDraft(el.value);
                update(el.value, el.selectionStart ?? el.value.length);
              }}
              onFocus={readKeys}
              onKeyDown={(e) => {
                // After the combobox has moved its selection.
                if (e.key === "ArrowDown" || e.key === "ArrowUp")
                  setTimeout(() => setActive(combobox.getSelectedOptionIndex()), 0);
              }}
              onClick={(e) => update(draft, e.currentTarget.selectionStart ?? draft.length)}
              onKeyUp={(e) => {
                if (["ArrowLeft", "ArrowRight", "Home", "End"].includes(e.key))
                  update(draft, e.currentTarget.selectionStart ?? draft.length);
              }}
              onBlur={() => combobox.closeDropdown()}
              spellCheck={false}
              autoComplete="off"
              ff="monospace"
            />
          </Combobox.Target>
          <Combobox.Dropdown hidden={items.length === 0}>
            <Combobox.Options aria-label="Suggestions" mah={320} style={{ overflowY: "auto" }}>
              {items.map((s, i) => (
                <Combobox.Option
                  value={String(i)}
                  key={`${s.kind}:${s.label}`}
                  id={optionId(i)}
                  data-testid="query-suggestion"
                >
                  <Group justify="space-between" wrap="nowrap" gap="md">
                    <Text span size="sm" ff="monospace">
                      {s.label}
                    </Text>
                    {s.detail && (
                      <Text span size="xs" c="inherit">
                        {s.detail}
                      </Text>
                    )}
                  </Group>
                </Combobox.Option>
              ))}
            </Combobox.Options>
          </Combobox.Dropdown>
        </Combobox>
        <Button type="submit">Search</Button>
      </Group>
    </form>
  );
}
