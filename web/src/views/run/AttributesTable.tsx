// Every Attribute (and AttributeMap instance) of the run, with its type and value. A long value
// shows its first 4 KiB and "Show all (N KiB)"; a value GetFlowState left out (past its answer's
// budget, docs/api.md) shows its size and "Load it", which reads it with GetAttributes.
import { useState } from "react";
import { Button, Table, Text } from "@mantine/core";
import type { AttributeView, FlowRef } from "../../api/types";
import { attributeValueText, attributeValueType } from "../../format";
import { ErrorAlert } from "../../components/ErrorAlert";
import { LongText, sizeText } from "../../components/JsonBlock";
import { getAttributes } from "./runCalls";
import "./run.css";

const td = Table.classes.td;

function LeftOut({ flow, view }: { flow: FlowRef | undefined; view: AttributeView }) {
  const key = view.attribute?.key ?? "";
  const instanceKey = view.attribute?.instanceKey ?? "";
  const [loaded, setLoaded] = useState<string>();
  const [loading, setLoading] = useState(false);
  const [error, setError] = useState<unknown>();
  const size = sizeText(Number(view.omittedBytes));
  if (loaded !== undefined) return <LongText text={loaded} label={`Attribute ${key}`} />;
  if (!flow)
    return (
      <Text size="sm" c="dimmed">
        ({size}, left out)
      </Text>
    );
  const load = () => {
    setLoading(true);
    getAttributes({ flow, keys: [key] })
      .then((r) => {
        const a = r.attributes.find((x) => x.key === key && (x.instanceKey ?? "") === instanceKey);
        setLoaded(a ? attributeValueText(a.value) : "(no value now)");
        setError(undefined);
      })
      .catch(setError)
      .finally(() => setLoading(false));
  };
  return (
    <div data-testid="left-out-value">
      <Text size="sm" c="dimmed">
        {size}, left out of the state&apos;s answer.
      </Text>
      <Button size="compact-xs" variant="light" mt={4} loading={loading} onClick={load} aria-label={`Load it (${size}) of Attribute ${key}`}>
        Load it ({size})
      </Button>
      {error !== undefined && <ErrorAlert error={error} title="GetAttributes failed" />}
    </div>
  );
}

/** `flow`: the run whose values a "Load it" reads (without it a value left out shows its size only). */
export function AttributesTable({ attributes, flow }: { attributes: AttributeView[]; flow?: FlowRef }) {
  if (attributes.length === 0) return <Text size="sm" c="dimmed">No Attribute has a value.</Text>;
  return (
    <Table striped aria-label="Attributes" data-testid="attributes" layout="fixed">
      <Table.Thead>
        <Table.Tr>
          <Table.Th scope="col" w="18%">Key</Table.Th>
          <Table.Th scope="col" w="14%">Instance</Table.Th>
          <Table.Th scope="col" w="8%">Type</Table.Th>
          <Table.Th scope="col">Value</Table.Th>
        </Table.Tr>
      </Table.Thead>
      <Table.Tbody>
        {attributes.map((a, i) => (
          <Table.Tr key={`${a.attribute?.key}/${a.attribute?.instanceKey}/${i}`} data-testid="attribute-row" data-key={a.attribute?.key}>
            <td className={`${td} dex-event-summary`}>{a.attribute?.key}</td>
            <td className={`${td} dex-event-summary`}>{a.attribute?.instanceKey}</td>
            <td className={td}>{attributeValueType(a.attribute?.value)}</td>
            <td className={td}>
              {Number(a.omittedBytes) > 0 ? (
                <LeftOut flow={flow} view={a} />
              ) : (
                <LongText text={attributeValueText(a.attribute?.value)} label={`Attribute ${a.attribute?.key}`} />
              )}
            </td>
          </Table.Tr>
        ))}
      </Table.Tbody>
    </Table>
  );
}
