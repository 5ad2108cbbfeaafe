import { Anchor, Stack, Text, Title } from "@mantine/core";
import { Link } from "react-router";

export function NotFoundPage() {
  return (
    <Stack>
      <Title order={1}>Not found</Title>
      <Text>
        dex-web has no view at this address. <Anchor component={Link} to="/">Search Flows</Anchor>.
      </Text>
    </Stack>
  );
}
