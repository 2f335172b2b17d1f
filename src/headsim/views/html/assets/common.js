// What headsim's drawing code shares with the pages that use it (the explorer loads it as
// /static/shared/common.js; notebook and exported views inline it, headsim.views.html): fonts, colour scales,
// number and token formatting, token ticks, and the high-similarity rule. No dependencies.

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

export function hexToRgb(hex) {
  const v = parseInt(hex.slice(1), 16);
  return [(v >> 16) & 255, (v >> 8) & 255, v & 255];
}

/** [r, g, b] of value t in [0, 1] on a colour scale ([[position, '#rrggbb'], ...]); null when t is not finite. */
export function rgbAt(scale, t) {
  if (!Number.isFinite(t)) return null;
  t = Math.min(1, Math.max(0, t));
  for (let k = 1; k < scale.length; k++) {
    if (t <= scale[k][0]) {
      const [t0, c0] = scale[k - 1], [t1, c1] = scale[k];
      const f = (t - t0) / Math.max(t1 - t0, 1e-9);
      const a = hexToRgb(c0), b = hexToRgb(c1);
      return a.map((x, i) => Math.round(x + f * (b[i] - x)));
    }
  }
  return hexToRgb(scale[scale.length - 1][1]);
}

/** CSS colour of value t in [0, 1] on a colour scale (for frames, legends); grey when t is not finite. */
export function colorAt(scale, t) {
  const c = rgbAt(scale, t);
  return c ? `rgb(${c.join(',')})` : '#d1d5db';
}

/** A 256-entry lookup table of a colour scale (Uint8Array of r, g, b). */
export function lut(scale) {
  const out = new Uint8Array(256 * 3);
  for (let k = 0; k < 256; k++) out.set(rgbAt(scale, k / 255), 3 * k);
  return out;
}

/** Text made safe for innerHTML. */
export function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
}
/** A number in 3 significant places (— when missing). */
export function fmt(v, digits = 3) {
  if (v == null || !Number.isFinite(v)) return '—';
  if (Math.abs(v) >= 100) return v.toFixed(0);
  if (Math.abs(v) >= 10) return v.toFixed(1);
  return v.toFixed(digits);
}

/**
 * The high-similarity rule of every view, written once: a pair (i, j) is high when its normalised similarity
 * S (Z·Zᵀ with the diagonal zeroed, divided by the head's maximum) is strictly greater than the threshold
 * (the paper: 0.3). It is the rule of the Python statistics: headsim.context_similarity.similarity
 * (``normalized > threshold``) and, for the corpus counts, headsim.stats.pairs.high_upper. The notebook
 * payload keeps it exact on its quantised levels (headsim.views.html.heads.similarity_levels:
 * S > k/steps ⇔ level ≥ k; widget.js matrices().above).
 */
export function isHigh(similarity, threshold) {
  return similarity > threshold;
}

/** Opacity of a token shaded by its similarity v to the hovered token: high pairs (isHigh) stand out
 * (0.3 to 0.9), the rest stay faint (up to 0.22). */
export function similarityShade(v, high) {
  const x = Math.max(0, Math.min(1, v));
  return high ? 0.3 + 0.6 * x : 0.22 * x;
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
