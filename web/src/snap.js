// Many series on one chart: uPlot draws aligned data (one x array, a y per series at each x), so
// series with their own steps make a table of (distinct steps) x (series) cells, nearly all empty:
// 200 downsampled curves of 400 points are 80,000 columns and 16 million cells. Past MAX_COLUMNS
// distinct steps the steps are snapped to MAX_COLUMNS equal columns across the charted range (a
// column is a fraction of a pixel on any screen). A point whose column is taken by the point before
// it in the same series moves to the next free column, so each series keeps every point, in order.
export const MAX_COLUMNS = 2000;

// tables: [[xs, ys], ...] each sorted by x -> [xs, ys1, ys2, ...] or null when they fit unsnapped
export function snapColumns(tables, maxColumns = MAX_COLUMNS) {
  const distinct = new Set();
  let lo = Infinity;
  let hi = -Infinity;
  for (const [xs] of tables) {
    for (const x of xs) distinct.add(x);
    if (xs.length) {
      lo = Math.min(lo, xs[0]);
      hi = Math.max(hi, xs[xs.length - 1]);
    }
  }
  if (distinct.size <= maxColumns) return null;
  const width = (hi - lo) / (maxColumns - 1);
  const columns = Array.from({ length: maxColumns }, (_, i) => lo + i * width);
  const out = [columns];
  for (const [xs, ys] of tables) {
    const row = new Array(maxColumns).fill(null);
    let next = 0; // the first column this series may still use
    for (let i = 0; i < xs.length; i++) {
      if (ys[i] == null) continue;
      const c = Math.max(next, Math.round((xs[i] - lo) / width));
      if (c >= maxColumns) break; // only when a series has more points than columns
      row[c] = ys[i];
      next = c + 1;
    }
    out.push(row);
  }
  return out;
}
