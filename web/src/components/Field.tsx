// One labelled value of a summary grid (a <dt>/<dd> pair, so screen readers read them together).
import type { ReactNode } from "react";
import { Text } from "@mantine/core";

export function Field({ label, children, testId }: { label: string; children: ReactNode; testId?: string }) {
  return (
    <div>
      <Text component="dt" size="xs" c="dimmed" tt="uppercase" fw={600}>
        {label}
      </Text>
      <Text component="dd" size="sm" m={0} data-testid={testId} style={{ wordBreak: "break-all" }}>
        {children === "" || children === undefined || children === null ? "—" : children}
      </Text>
    </div>
  );
}
