// Apache ECharts, only the parts the pages use (esbuild keeps the bundle to these).
import * as echarts from "echarts/core";
import { CustomChart, BarChart } from "echarts/charts";
import { TooltipComponent, GridComponent, LegendComponent, AriaComponent } from "echarts/components";
import { CanvasRenderer } from "echarts/renderers";

echarts.use([CustomChart, BarChart, TooltipComponent, GridComponent, LegendComponent, AriaComponent, CanvasRenderer]);

const charts = new Set();

// A chart in `container` (a sized element); resized with the window, disposed with `dispose()`.
export function chart(container, label) {
  container.setAttribute("role", "img");
  container.setAttribute("aria-label", label);
  const c = echarts.init(container, null, { renderer: "canvas" });
  charts.add(c);
  return c;
}

export function disposeAll() {
  for (const c of charts) c.dispose();
  charts.clear();
}

window.addEventListener("resize", () => {
  for (const c of charts) c.resize();
});

export const TEXT = "#1f2933";
export const PALETTE = ["#1f5fa6", "#d9822b", "#2b8a3e", "#8e44ad", "#c0392b", "#16817a", "#7f8c8d"];

export { echarts };
