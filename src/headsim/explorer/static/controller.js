// What the page does when the user acts: analyse a text or window, open a head, zoom a long window's
// overview, move the threshold. Each step asks the API, keeps the reply in the store and redraws the views.
import { postForAnalysis, api } from './api.js';
import { $, hideTooltip, setStatus, showError } from './dom.js';
import { renderThumbs } from './heads.js';
import { applyHover } from './hover.js';
import { drawPanel, renderMaps, setRanges } from './matrices.js';
import { renderPairs } from './pairs.js';
import { loadProfile } from './profile.js';
import { renderBlocks } from './separators.js';
import { overview, store } from './state.js';
import { markSeparators, renderTokens, renderWindowRow } from './tokens.js';

export function syncLabels() {
  const t = store.threshold.toFixed(2);
  $('thr-value').textContent = t;
  $('thr-value2').textContent = t;
  $('sep-value').textContent = store.sepThreshold.toFixed(2);
}

export function syncHeadInputs() {
  $('layer-input').value = store.layer;
  $('head-input').value = store.headNo;
}

/** Analyse the text box's text, window ``windowIndex``, then open the current head. */
export async function analyze(windowIndex) {
  const text = $('text-input').value;
  if (!text.trim()) { showError({ error: 'the text is empty', fix: 'type or paste a paragraph, or pick an example' }); return; }
  const seq = ++store.analyzeSeq;
  showError(null);
  setStatus(`analysing window ${windowIndex}…`, true);
  $('head-title').innerHTML = `Layer ${store.layer}, head ${store.headNo} <span class="muted">· analysing window ${windowIndex}…</span>`;
  $('analyze-btn').disabled = true;
  const live = liveStatus(seq);
  try {
    const data = await api('POST', '/api/analyze', {
      text, seq_len: Number($('seq-len').value), window: windowIndex, threshold: store.info.defaults.threshold,
    });
    if (seq !== store.analyzeSeq) return;
    clearInterval(live);
    $('head-title').innerHTML = `Layer ${store.layer}, head ${store.headNo} <span class="muted">· ${data.n_tokens} tokens · window ${data.window} · loading the head…</span>`;
    const sameTokens = store.analysis && store.analysis.id === data.id && store.analysis.window === data.window;
    store.analysis = data;
    if (!sameTokens) { store.ranges = null; store.pinned = null; }
    store.hover = null;
    setStatus(`${data.n_tokens} tokens in window ${data.window} (${data.n_windows} window${data.n_windows > 1 ? 's' : ''} of ${data.seq_len})`);
    renderWindowRow();
    renderTokens();
    renderThumbs();
    await loadHead();
  } catch (err) {
    if (seq === store.analyzeSeq) { showError(err); setStatus(''); updateHeadTitle(); }
  } finally {
    clearInterval(live);
    if (seq === store.analyzeSeq) $('analyze-btn').disabled = false;
  }
}

/** While analysis ``seq`` runs: the server's stage (/api/status) and the seconds it has taken, twice a second. */
function liveStatus(seq) {
  const started = performance.now();
  let asking = false;
  return setInterval(async () => {
    if (seq !== store.analyzeSeq || asking) return;
    asking = true;
    let stage = 'waiting for the server';
    try { const s = await api('GET', '/api/status'); if (s.busy) stage = s.stage; } catch (err) { /* the reply will say */ }
    asking = false;
    if (seq === store.analyzeSeq && $('analyze-btn').disabled) {
      setStatus(`${stage} · ${((performance.now() - started) / 1000).toFixed(0)} s`, true);
    }
  }, 500);
}

/** The previous (d = -1) or next (+1) window. */
export function stepWindow(d) {
  if (!store.analysis) return;
  const w = store.analysis.window + d;
  if (w >= 0 && w < store.analysis.n_windows) analyze(w);
}

/** Open head (layer, head), 1-based, clamped to the model. */
export function selectHead(layer, head) {
  if (!store.info) return;
  const L = store.info.model.n_layers, H = store.info.model.n_heads;
  if (!Number.isFinite(layer) || !Number.isFinite(head)) return;
  store.layer = Math.min(L, Math.max(1, Math.round(layer)));
  store.headNo = Math.min(H, Math.max(1, Math.round(head)));
  syncHeadInputs();
  renderThumbs();
  loadHead();
}

/** Fetch the open head of the current analysis (/api/head) and show it. */
export async function loadHead() {
  if (!store.analysis) return;
  const seq = ++store.headSeq;
  const a = store.analysis;
  const body = { id: a.id, window: a.window, layer: store.layer, head: store.headNo, sep_layer: store.sepLayer, sep_threshold: store.sepThreshold };
  let data;
  try {
    data = await postForAnalysis('/api/head', body, a, $('text-input').value);
  } catch (err) {
    if (seq === store.headSeq) showError(err);
    return;
  }
  if (seq !== store.headSeq || store.analysis !== a) return;
  showError(null);
  if (store.exact || (data.view && data.view.unit === 'bins')) { store.exact = null; store.ranges = null; store.pinned = null; }
  store.head = data;
  store.hover = store.pinned;
  updateHeadTitle();
  renderMaps();
  showPairs();
  renderBlocks();
  markSeparators();
  if (store.hover) applyHover();
  loadProfile();
}

export function updateHeadTitle() {
  if (!store.head) return;
  $('head-title').innerHTML = `Layer ${store.head.layer}, head ${store.head.head} <span class="muted">· ${store.head.n_tokens} tokens · window ${store.head.window}</span>`;
}

/** The pair table afresh, the hover kept on it. */
export function showPairs() {
  renderPairs();
  if (store.hover) applyHover();
}

/** A new threshold: the mask, the pairs, the model view's frames, the title. */
export function thresholdMoved() {
  drawPanel('mask-plot');
  showPairs();
  renderThumbs();
  updateHeadTitle();
}

/** A panel's dragged rectangle ``range`` (null: all). A long window's overview asks /api/zoom for the exact
 * values of the tokens under it (at most view.zoom_limit a side); otherwise the panels zoom together. */
export async function zoom(range) {
  if (!overview()) { setRanges(range); return; }
  const h = store.head, a = store.analysis;
  if (!range) { store.exact = null; store.ranges = null; renderMaps(); showPairs(); return; }
  if (store.exact) { setRanges(range); return; }
  const v = h.view, lim = v.zoom_limit;
  const r0 = v.bins[range.r0][0], c0 = v.bins[range.c0][0];
  const r1 = Math.min(v.bins[range.r1 - 1][1], r0 + lim), c1 = Math.min(v.bins[range.c1 - 1][1], c0 + lim);
  const body = { id: a.id, window: a.window, layer: h.layer, head: h.head, rows: [r0, r1], cols: [c0, c1] };
  let data;
  try { data = await postForAnalysis('/api/zoom', body, a, $('text-input').value); } catch (err) { showError(err); return; }
  if (store.head !== h) return;
  store.exact = data;
  store.ranges = { r0, r1, c0, c1 };
  store.hover = null;
  hideTooltip();
  renderMaps();
  showPairs();
}
