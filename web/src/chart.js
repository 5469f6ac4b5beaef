// uPlot line charts: one instance per chart, data updated in place (setData, addSeries) as polls
// bring new points; re-created only when the series change in another way or the y scale changes.
import { useEffect, useRef, useState } from "preact/hooks";
import uPlot from "uplot";
import { html } from "./html.js";
import { metric } from "./format.js";
import { snapColumns } from "./snap.js";

export const PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#c026d3", "#65a30d",
  "#b45309", "#4f46e5", "#db2777", "#0d9488"];
export const colorOf = (i) => PALETTE[i % PALETTE.length];

// series: [{key, label, steps, values}] -> uPlot's aligned data (the union of steps, nulls elsewhere)
export function align(series, logScale) {
  if (!series.length) return [[]];
  const tables = series.map((s) => {
    const xs = [];
    const ys = [];
    const seen = new Map();
    s.steps.forEach((x, i) => {
      let y = s.values[i];
      if (typeof y !== "number" || !Number.isFinite(y) || (logScale && y <= 0)) y = null;
      if (seen.has(x)) ys[seen.get(x)] = y; // a repeated step: the last value
      else {
        seen.set(x, xs.length);
        xs.push(x);
        ys.push(y);
      }
    });
    const order = xs.map((_, i) => i).sort((a, b) => xs[a] - xs[b]);
    return [order.map((i) => xs[i]), order.map((i) => ys[i])];
  });
  if (tables.length === 1) return tables[0];
  return snapColumns(tables) || uPlot.join(tables);
}

// dots only where a series has few points (a single point draws no line)
function fewPoints(u, idx) {
  let n = 0;
  for (const y of u.data[idx] || []) if (y != null && ++n > 40) return false;
  return true;
}

function seriesOpts(s, i, selected) {
  return { label: s.label, stroke: s.color || colorOf(i), width: s.key === selected ? 3 : 1.5, spanGaps: true,
    points: { show: fewPoints, size: 5 } };
}

// props: series, logScale, selected (a key), onSelect(key), tooltip(key, x, y) -> vnode, height, xLabel, yLabel
export function LineChart({ series, logScale = false, selected = null, onSelect, tooltip, height = 300, xLabel = "steps",
  yLabel = "", testid, attrs = {} }) {
  const box = useRef(null);
  const plot = useRef(null);
  const meta = useRef({ keys: [], log: null });
  const focused = useRef(null);
  const props = useRef({});
  props.current = { series, onSelect, tooltip };
  const [tip, setTip] = useState(null);

  useEffect(() => {
    const el = box.current;
    const keys = series.map((s) => s.key);
    const data = align(series, logScale);
    const m = meta.current;
    const u = plot.current;
    const grows = u && m.log === logScale && keys.length >= m.keys.length && m.keys.every((k, i) => keys[i] === k);
    if (grows) {
      for (let i = m.keys.length; i < keys.length; i++) u.addSeries(seriesOpts(series[i], i, selected));
      series.forEach((s, i) => (u.series[i + 1].width = s.key === selected ? 3 : 1.5));
      u.setData(data);
    } else {
      if (u) u.destroy();
      focused.current = null;
      const opts = {
        width: Math.max(el.clientWidth, 200),
        height,
        legend: { show: false },
        scales: { x: { time: false }, y: { distr: logScale ? 3 : 1 } },
        axes: [
          { label: xLabel, stroke: "#555", grid: { stroke: "#eee" }, size: 40 },
          { label: yLabel, stroke: "#555", grid: { stroke: "#eee" }, size: 60, values: (_, ticks) => ticks.map(metric) },
        ],
        cursor: { focus: { prox: 24 }, points: { size: 6 }, drag: { x: true, y: false } },
        focus: { alpha: 0.35 },
        series: [{ label: xLabel }, ...series.map((s, i) => seriesOpts(s, i, selected))],
        hooks: {
          setSeries: [(self, idx, opts) => {
            if (opts && opts.focus !== undefined) focused.current = opts.focus ? idx : null;
          }],
          setCursor: [(self) => {
            const idx = self.cursor.idx;
            const f = focused.current;
            const p = props.current;
            if (idx == null || f == null || !p.tooltip || self.cursor.left < 0) {
              setTip(null);
              return;
            }
            const s = p.series[f - 1];
            const y = self.data[f][idx];
            if (!s || y == null) {
              setTip(null);
              return;
            }
            setTip({ left: self.cursor.left + self.over.offsetLeft, top: self.cursor.top + self.over.offsetTop,
              content: p.tooltip(s.key, self.data[0][idx], y) });
          }],
        },
      };
      plot.current = new uPlot(opts, data, el);
      plot.current.over.addEventListener("click", () => {
        const f = focused.current;
        const p = props.current;
        if (f != null && p.series[f - 1] && p.onSelect) p.onSelect(p.series[f - 1].key);
      });
      plot.current.over.addEventListener("mouseleave", () => setTip(null));
    }
    meta.current = { keys, log: logScale };
    if (grows) u.redraw(false);
  }, [series, logScale, selected, height]);

  useEffect(() => {
    const el = box.current;
    const ro = new ResizeObserver(() => {
      const u = plot.current;
      if (u && el.clientWidth && Math.abs(u.width - el.clientWidth) > 1) u.setSize({ width: el.clientWidth, height });
    });
    ro.observe(el);
    return () => {
      ro.disconnect();
      if (plot.current) plot.current.destroy();
      plot.current = null;
    };
  }, []);

  return html`<div class="chart" data-testid=${testid} ...${attrs}>
    <div class="chart-canvas" ref=${box}></div>
    ${tip ? html`<div class="chart-tip" style=${{ left: tip.left + 12 + "px", top: tip.top + 12 + "px" }}>${tip.content}</div>` : null}
    ${series.length === 0 ? html`<div class="chart-empty">No data yet.</div>` : null}
  </div>`;
}

// exponential moving average (TensorBoard's smoothing, debiased); weight 0: the values as they are
export function smooth(values, weight) {
  if (!weight) return values;
  let last = 0;
  let n = 0;
  return values.map((v) => {
    if (typeof v !== "number" || !Number.isFinite(v)) return v;
    last = last * weight + (1 - weight) * v;
    n++;
    return last / (1 - Math.pow(weight, n));
  });
}
