import { Badge } from "@mantine/core";
import type { FlowStatus } from "../api/types";
import { statusColor, statusName } from "../format";

export function StatusBadge({ status }: { status: FlowStatus | string }) {
  return (
    <Badge color={statusColor(status)} variant="light" data-testid="status-badge">
      {statusName(status)}
    </Badge>
  );
}
