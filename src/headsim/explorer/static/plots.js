// Plotly helpers: token-labelled heatmaps, thumbnails grid. Plotly is the vendored global
// (static/vendor/plotly.min.js).

// Colour scales, colours and token ticks are the shared drawing code of the explorer and the notebook
// displays (headsim/views/html/assets/draw.js, served as /static/shared/draw.js).
export { FONT, MONO, MAGMA, BLUES, VIRIDIS, sqrtScale, BLUES_SQRT, MASK, HL, SEP, colorAt, shortTok, tickSet, esc, fmt,
  drawGrid, tileAt, drawColorbar } from './shared/draw.js';
import { FONT, MONO, tickSet, HL, SEP } from './shared/draw.js';

export const CONFIG = {
  displaylogo: false, responsive: true, scrollZoom: false,
  modeBarButtonsToRemove: ['select2d', 'lasso2d', 'autoScale2d', 'toggleSpikelines'],
  toImageButtonOptions: { format: 'png', scale: 2 },
};

function axisLength(div, axis) {
  const fl = div && div._fullLayout;
  return fl && fl[axis] && fl[axis]._length ? fl[axis]._length : (div ? div.clientWidth - 120 : 300);
}

/** Layout of a square token × token heatmap with token tick labels. */
export function matrixLayout(div, tokens, opts = {}) {
  const lenPx = axisLength(div, 'xaxis');
  const tx = tickSet(tokens, opts.xrange, lenPx);
  const ty = tickSet(tokens, opts.yrange, lenPx);
  const n = tokens.length;
  const tickfont = (size) => ({ family: MONO, size, color: '#374151' });
  return {
    margin: { l: 84, r: 8, t: 6, b: 84 },
    font: { family: FONT, size: 11 },
    paper_bgcolor: 'rgba(0,0,0,0)', plot_bgcolor: '#ffffff',
    dragmode: 'zoom', hovermode: 'closest',
    xaxis: {
      tickmode: 'array', tickvals: tx.vals, ticktext: tx.text, tickangle: -90, tickfont: tickfont(tx.fontPx),
      range: opts.xrange || [-0.5, n - 0.5], constrain: 'domain', showgrid: false, zeroline: false, ticks: '',
      title: { text: opts.xtitle || '', font: { size: 10, color: '#6b7280' }, standoff: 4 },
    },
    yaxis: {
      tickmode: 'array', tickvals: ty.vals, ticktext: ty.text, tickfont: tickfont(ty.fontPx),
      range: opts.yrange || [n - 0.5, -0.5], scaleanchor: 'x', constrain: 'domain', showgrid: false, zeroline: false, ticks: '',
      title: { text: opts.ytitle || '', font: { size: 10, color: '#6b7280' }, standoff: 4 },
    },
    shapes: opts.shapes || [],
    uirevision: opts.uirevision,
  };
}

export function heatmapTrace(z, colorscale, { zmin = 0, zmax = 1, showscale = true, name = '' } = {}) {
  return {
    type: 'heatmap', z, colorscale, zmin, zmax, zsmooth: false, hoverinfo: 'none', name,
    showscale, colorbar: { thickness: 9, len: 0.6, outlinewidth: 0, tickfont: { size: 9 }, x: 1.0, xpad: 4 },
  };
}

/** Bands marking row i and column j (a hovered token or pair) on a matrix of n tokens. */
export function crossShapes(i, j, n) {
  const band = { type: 'rect', line: { color: HL, width: 1.2 }, fillcolor: 'rgba(8,145,178,0.14)', layer: 'above' };
  const out = [];
  if (i != null) out.push({ ...band, xref: 'x', yref: 'y', x0: -0.5, x1: n - 0.5, y0: i - 0.5, y1: i + 0.5 });
  if (j != null) out.push({ ...band, xref: 'x', yref: 'y', x0: j - 0.5, x1: j + 0.5, y0: -0.5, y1: n - 0.5 });
  if (i != null && j != null) {
    out.push({ type: 'rect', xref: 'x', yref: 'y', x0: j - 0.5, x1: j + 0.5, y0: i - 0.5, y1: i + 0.5,
      line: { color: '#f59e0b', width: 2 }, fillcolor: 'rgba(0,0,0,0)', layer: 'above' });
  }
  return out;
}

/** Dashed lines along the rows and columns of separator positions (Fig 5). */
export function separatorShapes(columns, n) {
  const line = { type: 'line', line: { color: SEP, width: 1, dash: 'dot' }, layer: 'above', xref: 'x', yref: 'y' };
  const out = [];
  for (const c of columns) {
    out.push({ ...line, x0: c, x1: c, y0: -0.5, y1: n - 0.5 });
    out.push({ ...line, x0: -0.5, x1: n - 0.5, y0: c, y1: c });
  }
  return out;
}
