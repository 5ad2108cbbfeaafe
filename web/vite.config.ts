// dex-web's build: `npm run build` writes web/dist/, which scripts/build-web copies into
// <build>/share/dex-web/ (docs/dex-web.md). In development (`npm run dev`) the API calls under
// /api go to a running dex-server-zd's web listener (DEX_WEB_URL, default http://127.0.0.1:8802).
import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";

export default defineConfig({
  plugins: [react()],
  build: { outDir: "dist", emptyOutDir: true, chunkSizeWarningLimit: 1500 },
  server: {
    proxy: { "/api": process.env.DEX_WEB_URL ?? "http://127.0.0.1:8802" },
  },
});
