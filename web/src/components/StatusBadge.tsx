import { Badge } from "@mantine/core";
import type { FlowStatus } from "../api/types";
import { statusColor, statusName } from "../format";

export function StatusBadge({ status }: { status: FlowStatus | string }) {
  return (
    <Badge color={statusColor(status)} variant="dot" data-testid="status-badge" style={{ overflow: "visible" }} styles={{ label: { overflow: "visible" } }}>
      {statusName(status)}
    </Badge>
  );
}
