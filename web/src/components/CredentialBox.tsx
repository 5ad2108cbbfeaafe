// The header's credential box: a token kept in sessionStorage (this tab only) and sent with every
// call as `Authorization: Bearer <token>`: viewer to read, client or admin to act (docs/api.md,
// "Access").
import { useEffect, useState } from "react";
import { Button, Group, PasswordInput, Text } from "@mantine/core";
import { getToken, onTokenChange, setToken } from "../api/credential";

export function CredentialBox() {
  const [saved, setSaved] = useState(getToken());
  const [draft, setDraft] = useState("");
  useEffect(() => onTokenChange(() => setSaved(getToken())), []);

  if (saved !== "") {
    return (
      <Group gap="xs" wrap="nowrap">
        <Text size="sm" c="dimmed" role="status">
          admin token set (this tab)
        </Text>
        <Button size="xs" variant="default" onClick={() => setToken("")}>
          Forget token
        </Button>
      </Group>
    );
  }
  return (
    <form
      aria-label="Admin credential"
      onSubmit={(e) => {
        e.preventDefault();
        setToken(draft.trim());
        setDraft("");
      }}
    >
      <Group gap="xs" wrap="nowrap">
        <PasswordInput
          size="xs"
          w={260}
          label="Admin token"
          placeholder="optional"
          aria-describedby="credential-help"
          value={draft}
          onChange={(e) => setDraft(e.currentTarget.value)}
          styles={{ root: { display: "flex", alignItems: "center", gap: 6 }, label: { whiteSpace: "nowrap" }, wrapper: { flex: 1 } }}
        />
        <span id="credential-help" hidden>
          Kept in this tab only and sent as the Authorization header of every call: a viewer token
          lets dex-web read, a client or admin token lets it act on runs.
        </span>
        <Button size="xs" type="submit" disabled={draft.trim() === ""}>
          Use
        </Button>
      </Group>
    </form>
  );
}
