// The frame of every view: the header (the name, the links to the views, the credential box) and
// the view below it.
import { AppShell, Group, Anchor, Title } from "@mantine/core";
import { Link, NavLink, Outlet } from "react-router";
import { CredentialBox } from "./CredentialBox";

function HeaderLink({ to, label }: { to: string; label: string }) {
  return (
    <Anchor
      component={NavLink}
      to={to}
      end={to === "/"}
      fw={500}
      style={({ isActive }: { isActive: boolean }) => ({ textDecoration: isActive ? "underline" : "none" })}
    >
      {label}
    </Anchor>
  );
}

export function Layout() {
  return (
    <AppShell header={{ height: 56 }} padding="md">
      <AppShell.Header>
        <Group h="100%" px="md" justify="space-between" wrap="nowrap">
          <Group gap="lg" wrap="nowrap">
            <Anchor component={Link} to="/" underline="never" c="inherit" aria-label="dex: search Flows">
              <Title order={2} size="h3">dex</Title>
            </Anchor>
            <nav aria-label="Views">
              <Group gap="md">
                <HeaderLink to="/" label="Search" />
                <HeaderLink to="/node" label="Node" />
              </Group>
            </nav>
          </Group>
          <CredentialBox />
        </Group>
      </AppShell.Header>
      <AppShell.Main>
        {/* AppShell.Main is the page's one <main> landmark. */}
        <Outlet />
      </AppShell.Main>
    </AppShell>
  );
}
