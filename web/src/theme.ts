// dex-web's Mantine theme: Mantine's defaults with darker shades, so that text, links, badges and
// dimmed text meet WCAG AA contrast (4.5:1) on white; the browser tests check it with axe-core.
import { createTheme, type CSSVariablesResolver } from "@mantine/core";

export const theme = createTheme({
  primaryShade: { light: 8, dark: 8 },
});

export const cssVariablesResolver: CSSVariablesResolver = () => ({
  variables: {},
  light: { "--mantine-color-dimmed": "var(--mantine-color-gray-7)" },
  dark: {},
});
