// dex-web's first script, kept small: on a run's URL its imports start the Run page's three reads
// (runCalls.ts) and the layout Worker (elkLayout.ts) at once, and then it loads the app (React,
// Mantine and the views: a chunk of about 650 KB) so that the reads and the Worker's 1.6 MB
// script are under way while the app's code is fetched and compiled. Their modules are the same
// instances the app then uses, so the app takes what they started.
import "@mantine/core/styles.css";
import "./views/run/graph/elkLayout";
import "./views/run/runCalls";

void import("./appRoot");
