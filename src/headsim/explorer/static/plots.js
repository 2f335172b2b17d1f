// Plotly helpers: colour scales, token-labelled heatmaps, thumbnails grid. Plotly is the vendored
// global (static/vendor/plotly.min.js); nothing here draws by hand.

export const FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif';
export const MONO = 'ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace';

// matplotlib's magma / Blues / viridis (the colour maps of headsim's static figures)
export const MAGMA = [[0, '#000004'], [0.1, '#140e36'], [0.2, '#3b0f70'], [0.3, '#641a80'], [0.4, '#8c2981'],
  [0.5, '#b73779'], [0.6, '#de4968'], [0.7, '#f7705c'], [0.8, '#fe9f6d'], [0.9, '#fecf92'], [1, '#fcfdbf']];
export const BLUES = [[0, '#f7fbff'], [0.1, '#e3eef9'], [0.2, '#d0e1f2'], [0.3, '#b7d4ea'], [0.4, '#94c4df'],
  [0.5, '#6aaed6'], [0.6, '#4a98c9'], [0.7, '#2e7ebc'], [0.8, '#1764ab'], [0.9, '#084a91'], [1, '#08306b']];
export const VIRIDIS = [[0, '#440154'], [0.1, '#482475'], [0.2, '#414487'], [0.3, '#355f8d'], [0.4, '#2a788e'],
  [0.5, '#21918c'], [0.6, '#22a884'], [0.7, '#44bf70'], [0.8, '#7ad151'], [0.9, '#bddf26'], [1, '#fde725']];
/** A colour scale whose colours sit at the squares of their positions: a square-root colour map
 * (small attention weights stay visible next to the large [CLS]/[SEP] ones; the colour bar keeps true values). */
export function sqrtScale(scale) {
  return scale.map(([t, c]) => [t * t, c]);
}
export const BLUES_SQRT = sqrtScale(BLUES);
export const MASK = [[0, '#ffffff'], [1, '#1e1b4b']];
export const HL = '#0891b2';
export const SEP = '#d97706';

export const CONFIG = {
  displaylogo: false, responsive: true, scrollZoom: false,
  modeBarButtonsToRemove: ['select2d', 'lasso2d', 'autoScale2d', 'toggleSpikelines'],
  toImageButtonOptions: { format: 'png', scale: 2 },
};

function hexToRgb(hex) {
  const v = parseInt(hex.slice(1), 16);
  return [(v >> 16) & 255, (v >> 8) & 255, v & 255];
}

/** Colour of value t in [0, 1] on a Plotly-style colour scale (for frames, legends). */
export function colorAt(scale, t) {
  if (!Number.isFinite(t)) return '#d1d5db';
  t = Math.min(1, Math.max(0, t));
  for (let k = 1; k < scale.length; k++) {
    if (t <= scale[k][0]) {
      const [t0, c0] = scale[k - 1], [t1, c1] = scale[k];
      const f = (t - t0) / Math.max(t1 - t0, 1e-9);
      const a = hexToRgb(c0), b = hexToRgb(c1);
      return `rgb(${a.map((x, i) => Math.round(x + f * (b[i] - x))).join(',')})`;
    }
  }
  return scale[scale.length - 1][1];
}

export function shortTok(tok, max = 12) {
  return tok.length > max ? tok.slice(0, max - 1) + '…' : tok;
}

/** Tick values and labels "i:token" for the visible range, thinned so labels never overlap. */
export function tickSet(tokens, range, lengthPx) {
  const n = tokens.length;
  let lo = 0, hi = n - 1;
  if (range) { lo = Math.max(0, Math.ceil(Math.min(range[0], range[1]))); hi = Math.min(n - 1, Math.floor(Math.max(range[0], range[1]))); }
  const visible = Math.max(1, hi - lo + 1);
  const px = Math.max(lengthPx || 300, 60);
  const fontPx = px / visible >= 11 ? 10 : 9;
  const stride = Math.max(1, Math.ceil(visible * (fontPx + 1.5) / px));
  const vals = [], text = [];
  for (let i = lo; i <= hi; i++) {
    if ((i - lo) % stride === 0) { vals.push(i); text.push(`${i}:${shortTok(tokens[i])}`); }
  }
  return { vals, text, fontPx, stride };
}

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

/** The model view: every head's thumbnail tiled into one heatmap, layers as rows, heads as columns. */
export function tileThumbnails(thumbs, size) {
  const L = thumbs.length, H = thumbs[0].length;
  const gap = Math.max(2, Math.round(size / 6));
  const step = size + gap;
  const rows = L * step - gap, cols = H * step - gap;
  const z = Array.from({ length: rows }, () => new Array(cols).fill(null));
  for (let l = 0; l < L; l++) {
    for (let h = 0; h < H; h++) {
      const img = thumbs[l][h];
      for (let r = 0; r < size; r++) {
        const zr = z[l * step + r];
        for (let c = 0; c < size; c++) zr[h * step + c] = img[r * size + c];
      }
    }
  }
  return { z, L, H, size, gap, step, rows, cols };
}

export function tileFrame(grid, l, h, color, width, dash) {
  const pad = grid.gap * 0.42;
  return {
    type: 'rect', xref: 'x', yref: 'y', layer: 'above',
    x0: h * grid.step - 0.5 - pad, x1: h * grid.step + grid.size - 0.5 + pad,
    y0: l * grid.step - 0.5 - pad, y1: l * grid.step + grid.size - 0.5 + pad,
    line: { color, width, dash: dash || 'solid' }, fillcolor: 'rgba(0,0,0,0)',
  };
}

/** Which (layer, head), 0-based, a point of the tiled heatmap belongs to; null in the gaps. */
export function tileAt(grid, x, y) {
  const h = Math.floor((x + 0.5) / grid.step), l = Math.floor((y + 0.5) / grid.step);
  if (l < 0 || h < 0 || l >= grid.L || h >= grid.H) return null;
  return { l, h };
}
