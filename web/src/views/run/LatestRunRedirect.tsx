// `/flows/:flowId`: the Flow ID's latest run (DescribeFlow without a run ID), then its Run view.
import { Navigate, useParams } from "react-router";
import { Loader } from "@mantine/core";
import { describeFlow } from "../../api/calls";
import { useApi } from "../../useApi";
import { ErrorAlert } from "../../components/ErrorAlert";
import { runPath } from "../../format";

export function LatestRunRedirect() {
  const flowId = useParams().flowId ?? "";
  const latest = useApi((signal) => describeFlow({ flowId, runId: "" }, signal), [flowId]);
  if (latest.error !== undefined) return <ErrorAlert error={latest.error} title="DescribeFlow failed" />;
  if (!latest.data) return <Loader aria-label="Finding the latest run" />;
  return <Navigate replace to={runPath(latest.data.flowId, latest.data.runId)} />;
}
