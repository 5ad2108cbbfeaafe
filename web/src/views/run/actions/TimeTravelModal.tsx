// Time travel: a new run of the Flow ID from a point of this run's history. The point is first sent
// as a dry run, whose preview shows what the new run would start with; "Travel" then sends it for
// real, and the view moves to the new run. Changing the point drops the preview.
import { useState } from "react";
import { Autocomplete, Button, NativeSelect, Textarea, TextInput } from "@mantine/core";
import { useNavigate } from "react-router";
import { timeTravel } from "../../../api/calls";
import type { TimeTravelKind, TimeTravelPoint, TimeTravelResponse } from "../../../api/types";
import { formatTime } from "../../../format";
import { ActionModal } from "./ActionModal";
import type { ActionProps } from "./actionProps";
import { InputError } from "./encode";
import { knownExecutionIds, knownStepTypes } from "./knownNames";
import { parseDatetime } from "./attributeValue";
import { TimeTravelPreview } from "./TimeTravelPreview";
import { useAction } from "./useAction";

const kinds: { value: TimeTravelKind; label: string }[] = [
  { value: "TIME_TRAVEL_BEGINNING", label: "The beginning (just after the run started)" },
  { value: "TIME_TRAVEL_EVENT_TIME", label: "A time (the state after the last change at or before it)" },
  { value: "TIME_TRAVEL_FIRST_OF_STEP_TYPE", label: "The start of a Step type's first execution" },
  { value: "TIME_TRAVEL_LATEST_OF_STEP_TYPE", label: "The start of a Step type's latest execution" },
  { value: "TIME_TRAVEL_STEP_EXECUTION", label: "The start of a Step execution" },
];

export function TimeTravelModal({ flow, state, opened, onClose, onDone }: ActionProps) {
  const navigate = useNavigate();
  const [kind, setKind] = useState<TimeTravelKind>("TIME_TRAVEL_BEGINNING");
  const [time, setTime] = useState(formatTime(flow.startUnixMs));
  const [stepType, setStepType] = useState("");
  const [executionId, setExecutionId] = useState("");
  const [reason, setReason] = useState("");
  const [preview, setPreview] = useState<{ point: TimeTravelPoint; reason: string; answer: TimeTravelResponse }>();
  const dry = useAction<TimeTravelResponse>();
  const travel = useAction<TimeTravelResponse>();
  const flowRef = { flowId: flow.flowId, runId: flow.runId };

  const edit =
    <T,>(set: (v: T) => void) =>
    (v: T) => {
      set(v);
      setPreview(undefined);
      travel.reset();
    };

  const point = (): TimeTravelPoint => {
    switch (kind) {
      case "TIME_TRAVEL_BEGINNING":
        return { kind };
      case "TIME_TRAVEL_EVENT_TIME":
        return { kind, eventTimeMs: parseDatetime(time) };
      case "TIME_TRAVEL_FIRST_OF_STEP_TYPE":
      case "TIME_TRAVEL_LATEST_OF_STEP_TYPE":
        if (stepType.trim() === "") throw new InputError("name the Step type");
        return { kind, stepType: stepType.trim() };
      case "TIME_TRAVEL_STEP_EXECUTION":
        if (executionId.trim() === "") throw new InputError("name the Step execution");
        return { kind, stepExecutionId: executionId.trim() };
    }
  };

  const previewIt = () => {
    setPreview(undefined);
    travel.reset();
    let p: TimeTravelPoint | undefined;
    const why = reason;
    void dry.send(
      (requestId) => {
        p = point();
        return timeTravel({ flow: flowRef, point: p, reason: why, requestId, dryRun: true });
      },
      (answer) => p && setPreview({ point: p, reason: why, answer }),
    );
  };

  const travelIt = () => {
    if (!preview) return;
    void travel.send(
      (requestId) =>
        timeTravel({ flow: flowRef, point: preview.point, reason: preview.reason, requestId, dryRun: false }),
      (r) => {
        onDone(r.alreadyDone ? `Time travel was already done: run ${r.runId}.` : `Traveled: new run ${r.runId}.`);
        onClose();
        navigate(`/flows/${encodeURIComponent(flow.flowId)}/runs/${encodeURIComponent(r.runId)}`);
      },
    );
  };

  // The modal shows the dry run's error, or once previewed, the real call's.
  const shown = preview ? travel : dry;

  return (
    <ActionModal
      opened={opened}
      onClose={onClose}
      title="Time travel"
      action={shown}
      submitLabel={preview ? "Preview again" : "Preview (dry run)"}
      onSubmit={previewIt}
      size={1100}
      testId="time-travel-modal"
      result={preview && <TimeTravelPreview preview={preview.answer} />}
      extraButtons={
        preview && (
          <Button color="red" onClick={travelIt} loading={travel.busy}>
            Travel
          </Button>
        )
      }
    >
      <NativeSelect
        label="Point"
        data-autofocus
        data={kinds}
        value={kind}
        onChange={(e) => edit(setKind)(e.currentTarget.value as TimeTravelKind)}
      />
      {kind === "TIME_TRAVEL_EVENT_TIME" && (
        <TextInput
          label="Time (UTC)"
          description="e.g. 2027-01-15 10:00:00.000 (a history event's time), or Unix milliseconds"
          value={time}
          onChange={(e) => edit(setTime)(e.currentTarget.value)}
        />
      )}
      {(kind === "TIME_TRAVEL_FIRST_OF_STEP_TYPE" || kind === "TIME_TRAVEL_LATEST_OF_STEP_TYPE") && (
        <Autocomplete label="Step type" required data={knownStepTypes(state)} value={stepType} onChange={edit(setStepType)} />
      )}
      {kind === "TIME_TRAVEL_STEP_EXECUTION" && (
        <Autocomplete
          label="Step execution ID"
          required
          data={knownExecutionIds(state)}
          value={executionId}
          onChange={edit(setExecutionId)}
        />
      )}
      <Textarea
        label="Reason"
        description={'In the new run\'s start and the old run\'s history (default "time travel"); a running run ends TERMINATED'}
        autosize
        minRows={2}
        value={reason}
        onChange={(e) => edit(setReason)(e.currentTarget.value)}
      />
    </ActionModal>
  );
}
