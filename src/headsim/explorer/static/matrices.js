// The open head's four matrix panels (attention, similarity S, high-similarity mask, block averages): the
// shared canvas renderer (draw.js MatrixView, as in the notebook displays), hovered, clicked to pin, zoomed
// together by a dragged rectangle (double-click or "reset zoom": all tokens). A long window shows means over
// position bins until a zoom brings exact values (store.exact).
import * as P from './plots.js';
import { $, hideTooltip, showTooltip } from './dom.js';
import { actions, binOf, high, overview, store } from './state.js';

export const MATRIX_PLOTS = ['attn-plot', 'sim-plot', 'mask-plot', 'blocks-plot'];

/** The panel of element ``id``, made on first use. */
function panel(id) {
  if (!store.panels[id]) {
    store.panels[id] = new P.MatrixView($(id), {
      onHover: (at, ev) => {
        if (!at || !store.head) { actions.setHover(null); hideTooltip(); return; }
        actions.setHover({ i: at.i, j: at.j, src: id });
        showTooltip(ev, tooltipHtml(at.i, at.j, id));
      },
      onClick: (at) => { if (store.head) actions.togglePin({ i: at.i, j: at.j, src: id }); },
      onZoom: (range) => actions.zoom(range),
    });
  }
  return store.panels[id];
}

/** Show ``range`` on every panel (kept in step). */
export function setRanges(range) {
  store.ranges = range;
  for (const v of Object.values(store.panels)) v.setRange(range);
  showMaskCount();
}

/** The high pairs i < j among the cells the mask panel shows now (its zoom; a long window's overview: pairs
 * of bins whose mean similarity is above the threshold, as drawn), and their unit. */
export function shownPairCount() {
  const M = matrices(), v = store.panels['mask-plot'];
  const { r0, r1, c0, c1 } = (v && v.range) || { r0: 0, r1: M.n, c0: 0, c1: M.n };
  let k = 0;
  for (let i = r0; i < r1; i++) for (let j = Math.max(c0, i + 1); j < c1; j++) if (high(M.sim(i, j))) k++;
  return { count: k, unit: overview() && !store.exact ? 'bin pairs' : 'pairs', zoomed: !!(v && v.range) };
}

/** The mask panel's caption: the count of the cells it shows. */
export function showMaskCount() {
  if (!store.head) return;
  const c = shownPairCount();
  $('pair-count2').textContent = c.count;
  $('pair-unit').textContent = c.unit;
  $('pair-where').textContent = c.zoomed ? ' in the cells shown' : '';
}

function mapSide(id) {
  const w = $(id).clientWidth || 380;
  return Math.max(150, Math.min(w - 86, 640));
}

/** What the maps draw now: n, labels, separator lines and attention / similarity at (row, column). */
export function matrices() {
  const h = store.head, E = store.exact;
  if (E) {
    const inside = (i, j) => i >= E.rows[0] && i < E.rows[1] && j >= E.cols[0] && j < E.cols[1];
    return { n: h.n_tokens, labels: h.tokens, lines: h.separators.columns, attention: E.attention,
      att: (i, j) => (inside(i, j) ? E.attention[i - E.rows[0]][j - E.cols[0]] : NaN),
      sim: (i, j) => (inside(i, j) ? E.similarity[i - E.rows[0]][j - E.cols[0]] : NaN),
      blk: (i, j) => h.separators.block_average[binOf(i)][binOf(j)] };
  }
  const ov = overview();
  return { n: ov ? h.view.n : h.n_tokens, labels: ov ? h.view.labels : h.tokens, attention: h.attention,
    lines: ov ? [...new Set(h.separators.columns.map(binOf))] : h.separators.columns,
    att: (i, j) => h.attention[i][j], sim: (i, j) => h.similarity[i][j], blk: (i, j) => h.separators.block_average[i][j] };
}

/** MatrixView.draw options of panel ``id`` for the current head, hover and threshold. */
function mapSpec(id) {
  const h = store.head, M = matrices(), hv = store.hover;
  const spec = { n: M.n, labels: M.labels, side: mapSide(id), lines: store.showSeps ? M.lines : [] };
  if (hv) { spec.cross = { i: hv.i, j: hv.src === 'text' ? null : hv.j }; if (hv.src !== 'text') spec.pair = { i: hv.i, j: hv.j }; }
  if (id === 'attn-plot') {
    let amax = 0;
    for (const row of M.attention) for (const v of row) if (v > amax) amax = v;
    const s = amax > 0 ? 1 / amax : 0;
    return { ...spec, scale: P.BLUES, value: (i, j) => Math.sqrt(M.att(i, j) * s) };
  }
  if (id === 'sim-plot') return { ...spec, scale: P.MAGMA, value: (i, j) => M.sim(i, j) };
  if (id === 'mask-plot') return { ...spec, scale: P.MASK, value: (i, j) => { const v = M.sim(i, j); return Number.isFinite(v) ? (high(v) ? 1 : 0) : NaN; } };
  const b = h.separators.block_average;
  let lo = 0, hi = -Infinity;
  for (const row of b) for (const v of row) { if (v > hi) hi = v; if (v < lo) lo = v; }
  hi = hi > 0 ? hi : 1;
  return { ...spec, scale: P.MAGMA, value: (i, j) => (M.blk(i, j) - lo) / (hi - lo) };
}

/** Draw every panel afresh in store.ranges (a long window switches between bins and tokens). */
export function renderMaps() {
  if (!store.head) return;
  for (const id of MATRIX_PLOTS) {
    const v = panel(id);
    v.range = store.ranges;
    v.spec = null;
    v.draw(mapSpec(id));
  }
  showMaskCount();
}

/** Redraw panel ``id`` (the mask after a threshold move, the blocks after new separators). */
export function drawPanel(id) {
  if (!store.head) return;
  panel(id).draw(mapSpec(id));
  if (id === 'mask-plot') showMaskCount();
}

/** Redraw the panels already drawn (a new hover). */
export function redrawPanels() {
  for (const id of MATRIX_PLOTS) if (store.panels[id] && store.panels[id].spec) store.panels[id].draw(mapSpec(id));
}

function tokLabel(k) {
  return overview() && !store.exact ? `tokens ${store.head.view.labels[k]}` : `${k}:${store.head.tokens[k]}`;
}

/** The tooltip of cell (i, j) of panel ``src``. */
function tooltipHtml(i, j, src) {
  const h = store.head, M = matrices(), mean = overview() && !store.exact ? 'mean ' : '';
  let extra = '';
  if (src === 'blocks-plot') extra = ` · block avg <b>${P.fmt(M.blk(i, j), 4)}</b>` + (overview() ? '' : ` (blocks ${h.separators.blocks[i]}, ${h.separators.blocks[j]})`);
  const sim = M.sim(i, j);
  return `<span class="mono">${P.esc(tokLabel(i))}</span> → <span class="mono">${P.esc(tokLabel(j))}</span>`
    + ` · ${mean}attention <b>${P.fmt(M.att(i, j), 4)}</b> · ${mean}similarity <b>${P.fmt(sim, 4)}</b>${i !== j && high(sim) ? ' ✓' : ''}${extra}`;
}
