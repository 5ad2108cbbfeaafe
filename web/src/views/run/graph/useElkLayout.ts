// The hook over elkLayout.ts: a view's layout, asked for in the render that computes the view.
import { useEffect, useMemo, useState } from "react";
import { layoutOf, shapeOf, type Laid, type Layout } from "./elkLayout";
import type { GraphView } from "./graphView";

export { nodeHeight, nodeWidth, preloadElk, type Layout } from "./elkLayout";

export function useElkLayout(view: GraphView | undefined): { layout: Layout | undefined; error: unknown } {
  const [laid, setLaid] = useState<Laid>();
  const [error, setError] = useState<unknown>();
  const shape = useMemo(() => (view ? shapeOf(view) : undefined), [view]);
  const pending = useMemo(() => (view && shape !== undefined ? layoutOf(view, shape) : undefined), [shape]); // eslint-disable-line react-hooks/exhaustive-deps
  useEffect(() => {
    if (!pending) return;
    let stale = false;
    pending.then(
      (l) => {
        if (stale) return;
        setLaid(l);
        setError(undefined);
      },
      (e) => !stale && setError(e),
    );
    return () => {
      stale = true;
    };
  }, [pending]);
  const layout = useMemo(
    () => (view && laid && laid.shape === shape ? { view, width: laid.width, height: laid.height, boxes: laid.boxes, routes: laid.routes } : undefined),
    [view, laid, shape],
  );
  return { layout, error };
}
