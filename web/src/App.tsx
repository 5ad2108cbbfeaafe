// The app's routes: every view has its own shareable URL (the server answers index.html for them).
import { Route, Routes } from "react-router";
import { Layout } from "./components/Layout";
import { SearchPage } from "./views/search/SearchPage";
import { RunPage } from "./views/run/RunPage";
import { LatestRunRedirect } from "./views/run/LatestRunRedirect";
import { NodePage } from "./views/node/NodePage";
import { NotFoundPage } from "./views/NotFoundPage";

export function App() {
  return (
    <Routes>
      <Route element={<Layout />}>
        <Route index element={<SearchPage />} />
        <Route path="search" element={<SearchPage />} />
        <Route path="flows/:flowId" element={<LatestRunRedirect />} />
        <Route path="flows/:flowId/runs/:runId" element={<RunPage />} />
        <Route path="node" element={<NodePage />} />
        <Route path="*" element={<NotFoundPage />} />
      </Route>
    </Routes>
  );
}
