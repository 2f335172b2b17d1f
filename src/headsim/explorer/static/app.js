// headsim explorer — page logic. Talks only to this server's JSON API (/api/...); see /docs.
// Layers and heads are 1-based everywhere on the page (as in the API); token positions 0-based.
import * as P from './plots.js';

const $ = (id) => document.getElementById(id);
const Plotly = window.Plotly;

const S = {
  info: null, examples: [], analysis: null, head: null, runRows: null, profile: null,
  layer: 1, headNo: 1, threshold: 0.3, sepLayer: null, sepThreshold: 0.5,
  thumbKind: 'similarity', colorBy: 'pairs', shadeMode: 'similarity', showSeps: true,
  sort: { key: 'index_i', dir: 1 }, pairs: [], hover: null, pinned: null, ranges: null, grid: null,
  headSeq: 0, profileSeq: 0, analyzeSeq: 0,
};
const MATRIX_PLOTS = ['attn-plot', 'sim-plot', 'mask-plot', 'blocks-plot'];
const MAX_ROWS = 500;

// ------------------------------------------------------------------------------------------
// small utilities

const { esc, fmt } = P;  // shared with the notebook displays (draw.js)
function rafOnce(fn) {
  let pending = false;
  return (...args) => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; fn(...args); });
  };
}
function debounce(fn, ms) {
  let t = null;
  return (...args) => { clearTimeout(t); t = setTimeout(() => fn(...args), ms); };
}

async function api(method, url, body) {
  let res;
  try {
    res = await fetch(url, {
      method,
      headers: body ? { 'Content-Type': 'application/json' } : {},
      body: body ? JSON.stringify(body) : undefined,
    });
  } catch (e) {
    throw { error: 'the server is not reachable', fix: 'is `headsim serve` still running? Restart it and reload the page.' };
  }
  let data = null;
  try { data = await res.json(); } catch (e) { /* not JSON */ }
  if (!res.ok) throw (data && data.error) ? { ...data, status: res.status } : { error: `HTTP ${res.status}`, fix: '', status: res.status };
  return data;
}

function showError(err) {
  const box = $('error');
  if (!err) { box.hidden = true; box.textContent = ''; return; }
  box.innerHTML = `<b>${esc(err.error || String(err))}</b>` + (err.fix ? `<div class="fix">fix: ${esc(err.fix)}</div>` : '');
  box.hidden = false;
}
function setStatus(text, busy = false) {
  const el = $('status');
  el.textContent = text;
  el.classList.toggle('busy', busy);
}

// ------------------------------------------------------------------------------------------
// start-up

async function init() {
  wireControls();
  try {
    S.info = await api('GET', '/api/info');
  } catch (err) { showError(err); return; }
  const m = S.info.model;
  $('model-line').textContent = `model ${m.name}` + (m.commit ? ` @ ${m.commit.slice(0, 12)}` : '') +
    ` · ${m.class} · ${m.n_layers} layers × ${m.n_heads} heads · d_head ${m.d_head} · ${m.device}`;
  $('model-line').title = `${m.source}` + (m.commit ? ` at commit ${m.commit}` : '') +
    ` (${m.model_type}, ${m.dtype}, max ${m.max_seq_len} tokens)`;
  $('numbering').textContent = 'Layers and heads numbered from 1 · tokens from 0 ([CLS] = 0)';
  $('n-layers').textContent = m.n_layers;
  $('n-heads').textContent = m.n_heads;
  $('layer-input').max = m.n_layers;
  $('head-input').max = m.n_heads;
  $('seq-len').max = S.info.limits.max_seq_len;
  $('seq-len').value = S.info.defaults.seq_len;
  S.threshold = S.info.defaults.threshold;
  S.sepThreshold = S.info.defaults.sep_threshold;
  S.sepLayer = S.info.defaults.sep_layer;
  S.layer = m.n_layers;
  S.headNo = 1;
  $('threshold').value = S.threshold;
  $('sep-threshold').value = S.sepThreshold;
  syncLabels();
  const sel = $('sep-layer');
  for (let l = 1; l <= m.n_layers; l++) sel.add(new Option(`${l}${l === m.n_layers ? ' (last)' : ''}`, String(l)));
  sel.value = String(S.sepLayer);
  syncHeadInputs();

  const run = S.info.run;
  const runLine = $('run-line');
  if (run) {
    runLine.textContent = `run ${run.name} · ${run.n_layers}×${run.n_heads} heads` + (run.model ? ` · ${run.model}` : '') +
      (run.commit ? ` @ ${run.commit.slice(0, 12)}` : '');
    if (run.commit) runLine.title = `made with ${run.model} at commit ${run.commit}`;
    runLine.classList.add('loaded');
    if (run.warnings && run.warnings.length) {
      runLine.classList.add('warn');
      runLine.textContent += ' ⚠';
      runLine.title = run.warnings.join('\n');
    }
    try { S.runRows = (await api('GET', '/api/heads')).rows; } catch (err) { showError(err); }
  } else {
    runLine.textContent = 'no run loaded (headsim serve --run DIR adds corpus statistics)';
  }
  fillColorBy();

  try {
    S.examples = (await api('GET', '/api/examples')).examples;
  } catch (err) { showError(err); }
  const ex = $('example-select');
  const groups = {};
  for (const e of S.examples) {
    const label = e.source === 'run' ? `Windows of run ${run ? run.name : ''}` : 'Built-in paragraphs';
    if (!groups[label]) { groups[label] = document.createElement('optgroup'); groups[label].label = label; ex.append(groups[label]); }
    groups[label].append(new Option(e.title, e.id));
  }
  if (S.examples.length) {
    ex.value = S.examples[0].id;
    $('text-input').value = S.examples[0].text;
    analyze(0);
  }
}

function fillColorBy() {
  const sel = $('color-by');
  sel.innerHTML = '';
  const add = (group, value, label, title) => {
    const o = new Option(label, value);
    if (title) o.title = title;
    group.append(o);
  };
  const gText = document.createElement('optgroup');
  gText.label = 'This text';
  add(gText, 'none', 'none');
  add(gText, 'pairs', 'pairs above threshold', 'number of high-similarity pairs at the current threshold');
  for (const [k, d] of Object.entries(S.info.text_stats)) add(gText, `text:${k}`, k, d);
  sel.append(gText);
  if (S.runRows && S.info.run) {
    const gRun = document.createElement('optgroup');
    gRun.label = `Run ${S.info.run.name} (corpus)`;
    for (const k of S.info.run.stats) add(gRun, `run:${k}`, k, S.info.head_stats[k] || '');
    sel.append(gRun);
    S.colorBy = S.info.run.stats.includes('p_repeat') ? 'run:p_repeat' : `run:${S.info.run.stats[0]}`;
  } else {
    S.colorBy = 'pairs';
  }
  sel.value = S.colorBy;
}

function wireControls() {
  $('analyze-btn').addEventListener('click', () => analyze(0));
  $('text-input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); analyze(0); }
  });
  $('text-input').addEventListener('input', () => { $('example-select').value = ''; });
  $('example-select').addEventListener('change', (e) => {
    const found = S.examples.find((x) => x.id === e.target.value);
    if (found) { $('text-input').value = found.text; analyze(0); }
  });
  $('window-select').addEventListener('change', (e) => analyze(Number(e.target.value)));
  $('win-prev').addEventListener('click', () => stepWindow(-1));
  $('win-next').addEventListener('click', () => stepWindow(1));

  const onThreshold = rafOnce(() => { updateMask(); renderPairs(); updateThumbFrames(); updateHeadTitle(); });
  $('threshold').addEventListener('input', (e) => { S.threshold = Number(e.target.value); syncLabels(); onThreshold(); });
  $('sep-threshold').addEventListener('input', (e) => { S.sepThreshold = Number(e.target.value); syncLabels(); });
  $('sep-threshold').addEventListener('change', () => loadHead());
  $('sep-layer').addEventListener('change', (e) => { S.sepLayer = Number(e.target.value); loadHead(); });
  $('show-seps').addEventListener('change', (e) => { S.showSeps = e.target.checked; applyHover(true); });
  $('shade-mode').addEventListener('change', (e) => { S.shadeMode = e.target.value; applyHover(true); });
  $('color-by').addEventListener('change', (e) => { S.colorBy = e.target.value; updateThumbFrames(); renderStatMap(); });
  for (const b of document.querySelectorAll('[data-thumb]')) {
    b.addEventListener('click', () => {
      S.thumbKind = b.dataset.thumb;
      for (const x of document.querySelectorAll('[data-thumb]')) x.classList.toggle('on', x === b);
      renderThumbs();
    });
  }
  const onPick = () => selectHead(Number($('layer-input').value), Number($('head-input').value));
  $('layer-input').addEventListener('change', onPick);
  $('head-input').addEventListener('change', onPick);
  for (const th of document.querySelectorAll('#pair-table th')) {
    th.addEventListener('click', () => {
      const key = th.dataset.key;
      S.sort = { key, dir: S.sort.key === key ? -S.sort.dir : (key === 'similarity' ? -1 : 1) };
      renderPairs();
    });
  }
  $('csv-btn').addEventListener('click', downloadCsv);

  // linked highlighting from the text and the table
  const text = $('token-text');
  text.addEventListener('mouseover', (e) => {
    const t = e.target.closest('.tok');
    if (t) setHover({ i: Number(t.dataset.i), j: Number(t.dataset.i), src: 'text' });
  });
  text.addEventListener('mouseleave', () => setHover(null));
  text.addEventListener('click', (e) => {
    const t = e.target.closest('.tok');
    if (t) togglePin({ i: Number(t.dataset.i), j: Number(t.dataset.i), src: 'text' });
  });
  const tbody = document.querySelector('#pair-table tbody');
  tbody.addEventListener('mouseover', (e) => {
    const tr = e.target.closest('tr');
    if (tr && tr.dataset.i) setHover({ i: Number(tr.dataset.i), j: Number(tr.dataset.j), src: 'table' });
  });
  tbody.addEventListener('mouseleave', () => setHover(null));
  tbody.addEventListener('click', (e) => {
    const tr = e.target.closest('tr');
    if (tr && tr.dataset.i) togglePin({ i: Number(tr.dataset.i), j: Number(tr.dataset.j), src: 'table' });
  });

  document.addEventListener('keydown', (e) => {
    const tag = (e.target.tagName || '').toLowerCase();
    if (['input', 'textarea', 'select'].includes(tag) || !S.info) return;
    const moves = { ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0] };
    if (e.key === 'Escape' && S.pinned) { togglePin(S.pinned, false); return; }
    if (moves[e.key]) {
      e.preventDefault();
      selectHead(S.layer + moves[e.key][0], S.headNo + moves[e.key][1]);
    }
  });
  window.addEventListener('resize', debounce(() => { renderThumbs(); refreshTicks(); }, 150));
}

function syncLabels() {
  const t = S.threshold.toFixed(2);
  $('thr-value').textContent = t;
  $('thr-value2').textContent = t;
  $('sep-value').textContent = S.sepThreshold.toFixed(2);
}
function syncHeadInputs() {
  $('layer-input').value = S.layer;
  $('head-input').value = S.headNo;
}

// ------------------------------------------------------------------------------------------
// analysis

function stepWindow(d) {
  if (!S.analysis) return;
  const w = S.analysis.window + d;
  if (w >= 0 && w < S.analysis.n_windows) analyze(w);
}

async function analyze(windowIndex) {
  const text = $('text-input').value;
  if (!text.trim()) { showError({ error: 'the text is empty', fix: 'type or paste a paragraph, or pick an example' }); return; }
  const seq = ++S.analyzeSeq;
  showError(null);
  setStatus('running the model…', true);
  $('analyze-btn').disabled = true;
  try {
    const data = await api('POST', '/api/analyze', {
      text, seq_len: Number($('seq-len').value), window: windowIndex, threshold: S.info.defaults.threshold,
    });
    if (seq !== S.analyzeSeq) return;
    const sameTokens = S.analysis && S.analysis.id === data.id && S.analysis.window === data.window;
    S.analysis = data;
    if (!sameTokens) { S.ranges = null; S.pinned = null; }
    S.hover = null;
    setStatus(`${data.n_tokens} tokens in window ${data.window} (${data.n_windows} window${data.n_windows > 1 ? 's' : ''} of ${data.seq_len})`);
    renderWindowRow();
    renderTokens();
    renderThumbs();
    await loadHead();
  } catch (err) {
    if (seq === S.analyzeSeq) { showError(err); setStatus(''); }
  } finally {
    if (seq === S.analyzeSeq) $('analyze-btn').disabled = false;
  }
}

function renderWindowRow() {
  const a = S.analysis;
  const row = $('window-row');
  row.hidden = a.n_windows <= 1;
  const sel = $('window-select');
  sel.innerHTML = '';
  for (let w = 0; w < a.n_windows; w++) sel.add(new Option(String(w), String(w)));
  sel.value = String(a.window);
  $('window-note').textContent = `of 0–${a.n_windows - 1}`;
  $('token-count').textContent = `${a.n_tokens} · window ${a.window}`;
}

function renderTokens() {
  const a = S.analysis;
  const box = $('token-text');
  box.textContent = '';
  const frag = document.createDocumentFragment();
  S.tokenEls = [];
  let prevEnd = 0;
  for (let k = 0; k < a.n_tokens; k++) {
    const span = document.createElement('span');
    span.className = 'tok';
    span.dataset.i = k;
    if (a.special[k]) {
      span.classList.add('special');
      span.textContent = a.tokens[k];
      if (k > 0) frag.append(document.createTextNode(' '));
    } else {
      const [s, e] = a.offsets[k];
      if (s > prevEnd) frag.append(document.createTextNode(a.text.slice(prevEnd, s)));
      const piece = a.text.slice(Math.max(s, prevEnd), e);
      span.textContent = piece || a.tokens[k];
      span.classList.add(a.sentences[k] % 2 === 0 ? 's0' : 's1');
      prevEnd = Math.max(prevEnd, e);
    }
    span.title = `${k}:${a.tokens[k]}${a.sentences[k] >= 0 ? ` · sentence ${a.sentences[k]}` : ''}`;
    S.tokenEls.push(span);
    frag.append(span);
    if (a.special[k] && k === 0) frag.append(document.createTextNode(' '));
  }
  box.append(frag);
}

// ------------------------------------------------------------------------------------------
// model view (thumbnails)

function statGrid(key) {
  const a = S.analysis;
  if (!a || key === 'none') return null;
  const L = a.model.n_layers, H = a.model.n_heads;
  if (key === 'pairs') {
    const k = Math.round(S.threshold * a.heads.count_steps);
    return a.heads.high_counts.map((row) => row.map((c) => c[k]));
  }
  if (key.startsWith('text:')) return a.heads[key.slice(5)] || null;
  if (key.startsWith('run:') && S.runRows) {
    const name = key.slice(4);
    const g = Array.from({ length: L }, () => new Array(H).fill(null));
    for (const r of S.runRows) if (r.layer <= L && r.head <= H) g[r.layer - 1][r.head - 1] = r[name];
    return g;
  }
  return null;
}
function statLabel(key) {
  if (key === 'pairs') return `pairs > ${S.threshold.toFixed(2)}`;
  return key.replace(/^(text|run):/, '');
}
function gridRange(g) {
  let lo = Infinity, hi = -Infinity;
  for (const row of g) for (const v of row) if (v != null && Number.isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  return Number.isFinite(lo) ? [lo, hi] : [0, 1];
}

/** The model view: the shared canvas grid (draw.js, as in the notebook displays), frames coloured by the
 * chosen statistic, the open head outlined in red. */
function renderThumbs() {
  const a = S.analysis;
  if (!a) return;
  const th = a.thumbnails, images = th[S.thumbKind];
  const L = images.length, H = images[0].length;
  const div = $('thumb-plot');
  let canvas = div.querySelector('canvas.thumb-grid'), bar = div.querySelector('canvas.thumb-bar');
  if (!canvas) {
    div.innerHTML = '';
    const box = document.createElement('div');
    canvas = document.createElement('canvas');
    canvas.className = 'thumb-grid';
    bar = document.createElement('canvas');
    bar.className = 'thumb-bar';
    box.append(canvas, bar);
    div.append(box);
    const at = (ev) => {
      const r = canvas.getBoundingClientRect();
      return S.grid ? P.tileAt(S.grid, ev.clientX - r.left, ev.clientY - r.top) : null;
    };
    canvas.addEventListener('click', (ev) => { const t = at(ev); if (t) selectHead(t.l + 1, t.h + 1); });
    canvas.addEventListener('mousemove', (ev) => { const t = at(ev); if (t) describeThumb(t.l, t.h); else describeThumb(null); });
    canvas.addEventListener('mouseleave', () => describeThumb(null));
  }
  if (!S.thumbCache || S.thumbCache.analysis !== a) S.thumbCache = { analysis: a };
  if (!S.thumbCache[S.thumbKind]) {
    const size = Math.round(Math.sqrt(images[0][0].length));
    S.thumbCache[S.thumbKind] = images.map((row) => row.map((img) => ({ size, values: Float32Array.from(img, (v) => v / 100) })));
  }
  const thumbs = S.thumbCache[S.thumbKind];
  const g = statGrid(S.colorBy);
  const [lo, hi] = g ? gridRange(g) : [0, 1];
  const avail = Math.max(div.parentElement.clientWidth - 70, 320);
  const maxHeight = Math.max(240, Math.min(window.innerHeight * 0.5, 560));
  const tile = Math.max(16, Math.min(64, Math.floor(avail / H / 1.17), Math.floor(maxHeight / L / 1.17)));
  S.grid = P.drawGrid(canvas, {
    L, H, tile, thumb: (l, h) => thumbs[l][h], scale: S.thumbKind === 'attention' ? P.BLUES : P.MAGMA,
    frame: g ? (l, h) => P.colorAt(P.VIRIDIS, g[l][h] == null ? NaN : (hi > lo ? (g[l][h] - lo) / (hi - lo) : 0.5)) : null,
    selected: { l: S.layer - 1, h: S.headNo - 1 },
  });
  bar.hidden = !g;
  if (g) P.drawColorbar(bar, P.VIRIDIS, lo, hi, `frame: ${statLabel(S.colorBy)}`);
}

function describeThumb(l, h) {
  const el = $('thumb-status');
  if (l == null) { el.innerHTML = 'Click a head to open it. Keys: ← → head, ↑ ↓ layer.'; return; }
  const a = S.analysis;
  const k = Math.round(S.threshold * a.heads.count_steps);
  const parts = [`<b>Layer ${l + 1}, head ${h + 1}</b>`, `${a.heads.high_counts[l][h][k]} pairs with similarity > ${S.threshold.toFixed(2)} in this window`];
  const g = statGrid(S.colorBy);
  if (g && S.colorBy !== 'pairs') parts.push(`${statLabel(S.colorBy)} = ${fmt(g[l][h])}${S.colorBy.startsWith('run:') ? ' (corpus)' : ''}`);
  el.innerHTML = parts.join(' · ');
}

function updateThumbFrames() {
  renderThumbs();
}

// ------------------------------------------------------------------------------------------
// one head

function selectHead(layer, head) {
  if (!S.info) return;
  const L = S.info.model.n_layers, H = S.info.model.n_heads;
  if (!Number.isFinite(layer) || !Number.isFinite(head)) return;
  S.layer = Math.min(L, Math.max(1, Math.round(layer)));
  S.headNo = Math.min(H, Math.max(1, Math.round(head)));
  syncHeadInputs();
  renderThumbs();
  loadHead();
}

async function loadHead() {
  if (!S.analysis) return;
  const seq = ++S.headSeq;
  const a = S.analysis;
  const body = { id: a.id, window: a.window, layer: S.layer, head: S.headNo, sep_layer: S.sepLayer, sep_threshold: S.sepThreshold };
  let data;
  try {
    try {
      data = await api('POST', '/api/head', body);
    } catch (err) {
      if (err.status !== 404) throw err;  // the analysis left the server's cache: send the text instead
      data = await api('POST', '/api/head', { ...body, id: undefined, text: $('text-input').value, seq_len: a.seq_len });
    }
  } catch (err) {
    if (seq === S.headSeq) showError(err);
    return;
  }
  if (seq !== S.headSeq || S.analysis !== a) return;
  showError(null);
  S.head = data;
  S.hover = S.pinned;
  updateHeadTitle();
  renderMaps();
  renderPairs();
  renderBlocks();
  markSeparators();
  if (S.hover) applyHover(true);
  loadProfile();
}

function pairCount() {
  if (!S.head) return 0;
  const sim = S.head.similarity, n = sim.length, t = S.threshold;
  let c = 0;
  for (let i = 0; i < n; i++) for (let j = i + 1; j < n; j++) if (sim[i][j] > t) c++;
  return c;
}

function updateHeadTitle() {
  if (!S.head) return;
  const c = S.pairs ? S.pairs.length : pairCount();
  $('head-title').innerHTML = `Layer ${S.head.layer}, head ${S.head.head} <span class="muted">· ${S.head.n_tokens} tokens · window ${S.head.window}</span>`;
  $('pair-count2').textContent = c;
}

function baseShapes(id) {
  if (!S.head) return [];
  if (id === 'colscore-plot') {
    const t = S.head.separators.threshold;
    return [{ type: 'line', xref: 'paper', x0: 0, x1: 1, y0: t, y1: t, line: { color: P.SEP, width: 1, dash: 'dash' } }];
  }
  return [];
}

// the matrix panels: the shared canvas renderer (draw.js MatrixView, as in the notebook displays), hovered,
// clicked to pin, zoomed together by a dragged rectangle (double-click or "reset zoom": all tokens)
const VIEWS = {};
function matrixView(id) {
  if (!VIEWS[id]) {
    VIEWS[id] = new P.MatrixView($(id), {
      onHover: (at, ev) => {
        if (!at || !S.head) { setHover(null); hideTooltip(); return; }
        setHover({ i: at.i, j: at.j, src: id });
        showTooltip(ev, at.i, at.j, id);
      },
      onClick: (at) => { if (S.head) togglePin({ i: at.i, j: at.j, src: id }); },
      onZoom: (range) => { S.ranges = range; for (const v of Object.values(VIEWS)) v.setRange(range); },
    });
  }
  return VIEWS[id];
}

function mapSide(id) {
  const w = $(id).clientWidth || 380;
  return Math.max(150, Math.min(w - 86, 640));
}

/** drawMatrix options of panel ``id`` for the current head, hover and threshold. */
function mapSpec(id) {
  const h = S.head, n = h.n_tokens, hv = S.hover;
  const spec = { n, labels: h.tokens, side: mapSide(id), lines: S.showSeps ? h.separators.columns : [] };
  if (hv) { spec.cross = { i: hv.i, j: hv.src === 'text' ? null : hv.j }; if (hv.src !== 'text') spec.pair = { i: hv.i, j: hv.j }; }
  if (id === 'attn-plot') {
    let amax = 0;
    for (const row of h.attention) for (const v of row) if (v > amax) amax = v;
    const s = amax > 0 ? 1 / amax : 0;
    return { ...spec, scale: P.BLUES, value: (i, j) => Math.sqrt(h.attention[i][j] * s) };
  }
  if (id === 'sim-plot') return { ...spec, scale: P.MAGMA, value: (i, j) => h.similarity[i][j] };
  if (id === 'mask-plot') return { ...spec, scale: P.MASK, value: (i, j) => (h.similarity[i][j] > S.threshold ? 1 : 0) };
  const b = h.separators.block_average;
  let lo = 0, hi = -Infinity;
  for (const row of b) for (const v of row) { if (v > hi) hi = v; if (v < lo) lo = v; }
  hi = hi > 0 ? hi : 1;
  return { ...spec, scale: P.MAGMA, value: (i, j) => (b[i][j] - lo) / (hi - lo) };
}

function renderMaps() {
  if (!S.head) return;
  for (const id of MATRIX_PLOTS) {
    const v = matrixView(id);
    v.range = S.ranges;
    v.draw(mapSpec(id));
  }
}

function updateMask() {
  if (S.head) matrixView('mask-plot').draw(mapSpec('mask-plot'));
}

function refreshTicks() {
  renderMaps();
}

function tokLabel(k) {
  return `${k}:${S.head.tokens[k]}`;
}
function showTooltip(e, i, j, src) {
  const tip = $('tooltip');
  const h = S.head;
  let extra = '';
  if (src === 'blocks-plot') extra = ` · block avg <b>${fmt(h.separators.block_average[i][j], 4)}</b> (blocks ${h.separators.blocks[i]}, ${h.separators.blocks[j]})`;
  const sim = h.similarity[i][j];
  tip.innerHTML = `<span class="mono">${esc(tokLabel(i))}</span> → <span class="mono">${esc(tokLabel(j))}</span>`
    + ` · attention <b>${fmt(h.attention[i][j], 4)}</b> · similarity <b>${fmt(sim, 4)}</b>${i !== j && sim > S.threshold ? ' ✓' : ''}${extra}`;
  tip.hidden = false;
  const x = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
  const y = e.clientY + 16 + tip.offsetHeight > window.innerHeight ? e.clientY - tip.offsetHeight - 10 : e.clientY + 16;
  tip.style.left = `${x}px`;
  tip.style.top = `${y}px`;
}
function hideTooltip() { $('tooltip').hidden = true; }

// ------------------------------------------------------------------------------------------
// linked highlighting: maps, text, table

const scheduleHover = rafOnce(() => applyHover(false));
const samePair = (a, b) => (a === b) || (a && b && a.i === b.i && a.j === b.j && a.src === b.src);
function setHover(h) {
  h = h || S.pinned;  // a pinned token or pair stays highlighted when the mouse leaves
  if (samePair(S.hover, h)) return;
  S.hover = h;
  scheduleHover();
}
function togglePin(h, hovering = true) {
  S.pinned = samePair(S.pinned, h) ? null : h;
  S.hover = hovering ? h : S.pinned;
  scheduleHover();
  for (const el of S.tokenEls || []) el.classList.remove('pinned');
  if (S.pinned && S.tokenEls && S.tokenEls[S.pinned.i]) S.tokenEls[S.pinned.i].classList.add('pinned');
}

function shapesFor(id) {
  const base = baseShapes(id);
  const h = S.hover;
  if (!h || !S.head) return base;
  if (id === 'colscore-plot') {
    const band = { type: 'rect', xref: 'x', yref: 'paper', y0: 0, y1: 1, fillcolor: 'rgba(8,145,178,0.18)', line: { width: 0 } };
    const out = [{ ...band, x0: h.i - 0.5, x1: h.i + 0.5 }];
    if (h.j !== h.i) out.push({ ...band, x0: h.j - 0.5, x1: h.j + 0.5 });
    return base.concat(out);
  }
  return base;
}

function applyHover(force) {
  if (!S.head) return;
  for (const id of MATRIX_PLOTS) if (VIEWS[id] && VIEWS[id].spec) VIEWS[id].draw(mapSpec(id));
  const bars = $('colscore-plot');
  if (bars.data) Plotly.relayout(bars, { shapes: shapesFor('colscore-plot') });
  // text
  const els = S.tokenEls || [];
  for (const el of els) { el.classList.remove('hl-i', 'hl-j'); el.style.removeProperty('--a'); }
  const h = S.hover;
  if (h && els.length === S.head.n_tokens) {
    if (els[h.i]) els[h.i].classList.add('hl-i');
    if (h.j !== h.i && els[h.j]) els[h.j].classList.add('hl-j');
    const useAttn = h.src === 'attn-plot' || (h.src === 'text' && S.shadeMode === 'attention');
    const row = (useAttn ? S.head.attention : S.head.similarity)[h.i];
    let peak = 0;
    row.forEach((v, k) => { if (k !== h.i && v > peak) peak = v; });
    const scale = useAttn ? (peak > 0 ? 1 / peak : 0) : 1;
    const t = S.threshold;
    row.forEach((v, k) => {
      if (k === h.i) return;
      const x = Math.max(0, Math.min(1, v * scale));
      // similarity: pairs above the threshold stand out, the rest stay faint
      const a = useAttn ? 0.85 * x : (v > t ? 0.3 + 0.6 * x : 0.22 * x);
      if (a > 0.02) els[k].style.setProperty('--a', a.toFixed(3));
    });
  }
  // table
  for (const tr of document.querySelectorAll('#pair-table tbody tr.hl')) tr.classList.remove('hl');
  if (h) {
    for (const tr of document.querySelectorAll('#pair-table tbody tr')) {
      const i = Number(tr.dataset.i), j = Number(tr.dataset.j);
      const match = h.src === 'text' ? (i === h.i || j === h.i) : ((i === h.i && j === h.j) || (i === h.j && j === h.i));
      if (match) tr.classList.add('hl');
    }
  }
}

function markSeparators() {
  const cols = new Set(S.head ? S.head.separators.columns : []);
  (S.tokenEls || []).forEach((el, k) => el.classList.toggle('sep', cols.has(k)));
}

// ------------------------------------------------------------------------------------------
// pair table (Fig 9)

function renderPairs() {
  if (!S.head) return;
  const sim = S.head.similarity, tokens = S.head.tokens, n = sim.length, t = S.threshold;
  const pairs = [];
  for (let i = 0; i < n; i++) for (let j = i + 1; j < n; j++) if (sim[i][j] > t) pairs.push({ i, j, v: sim[i][j] });
  const { key, dir } = S.sort;
  const cmp = {
    token_i: (a, b) => tokens[a.i].localeCompare(tokens[b.i]),
    token_j: (a, b) => tokens[a.j].localeCompare(tokens[b.j]),
    index_i: (a, b) => a.i - b.i,
    index_j: (a, b) => a.j - b.j,
    similarity: (a, b) => a.v - b.v,
  }[key];
  pairs.sort((a, b) => dir * cmp(a, b) || a.i - b.i || a.j - b.j);
  S.pairs = pairs;
  const rows = pairs.slice(0, MAX_ROWS).map((p) => `<tr data-i="${p.i}" data-j="${p.j}">`
    + `<td class="tokcell">${esc(tokens[p.i])}</td><td class="tokcell">${esc(tokens[p.j])}</td>`
    + `<td class="num">${p.i}</td><td class="num">${p.j}</td>`
    + `<td class="num"><span class="bar" style="width:${Math.round(Math.max(0, p.v) * 40)}px"></span>${p.v.toFixed(3)}</td></tr>`);
  document.querySelector('#pair-table tbody').innerHTML = rows.join('')
    || `<tr><td colspan="5" class="empty">No pair above ${t.toFixed(2)} — lower the threshold.</td></tr>`;
  for (const th of document.querySelectorAll('#pair-table th')) {
    th.setAttribute('aria-sort', th.dataset.key === key ? (dir > 0 ? 'ascending' : 'descending') : 'none');
  }
  $('pair-note').textContent = `${pairs.length} pair${pairs.length === 1 ? '' : 's'} > ${t.toFixed(2)}`
    + (pairs.length > MAX_ROWS ? ` (first ${MAX_ROWS} shown)` : '');
  $('pair-count2').textContent = pairs.length;
  if (S.hover) applyHover(true);
}

function downloadCsv() {
  if (!S.head) return;
  const q = (s) => `"${String(s).replace(/"/g, '""')}"`;
  const lines = ['layer,head,token_i,token_j,index_i,index_j,similarity'];
  for (const p of S.pairs) lines.push([S.head.layer, S.head.head, q(S.head.tokens[p.i]), q(S.head.tokens[p.j]), p.i, p.j, p.v].join(','));
  const blob = new Blob([lines.join('\n') + '\n'], { type: 'text/csv' });
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = `pairs_L${S.head.layer}_H${S.head.head}_t${S.threshold.toFixed(2)}.csv`;
  a.click();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

// ------------------------------------------------------------------------------------------
// separators and blocks (Fig 5)

function renderBlocks() {
  const h = S.head, sep = h.separators, tokens = h.tokens, n = h.n_tokens;
  const cols = new Set(sep.columns);
  const bars = $('colscore-plot');
  const lenPx = (bars.clientWidth || 400) - 60;
  const ticks = P.tickSet(tokens, null, lenPx);
  Plotly.react(bars, [{
    type: 'bar', x: tokens.map((_, k) => k), y: sep.scores, hoverinfo: 'text',
    hovertext: tokens.map((t, k) => `${k}:${t} · score ${sep.scores[k].toFixed(3)}${cols.has(k) ? ' · separator' : ''}`),
    marker: { color: tokens.map((_, k) => (cols.has(k) ? P.SEP : '#9ca3af')) },
  }], {
    margin: { l: 40, r: 8, t: 26, b: 70 }, font: { family: P.FONT, size: 11 }, bargap: 0.15,
    paper_bgcolor: 'rgba(0,0,0,0)', plot_bgcolor: '#ffffff',
    title: { text: `layer ${sep.layer}, all heads · ${sep.columns.length} separator${sep.columns.length === 1 ? '' : 's'} above ${sep.threshold.toFixed(2)}: `
      + (sep.columns.slice(0, 12).map((k) => `${k}:${P.shortTok(tokens[k], 10)}`).join('  ') || 'none') + (sep.columns.length > 12 ? ' …' : ''),
      font: { size: 11 }, x: 0.01, xanchor: 'left', y: 0.97 },
    xaxis: { tickmode: 'array', tickvals: ticks.vals, ticktext: ticks.text, tickangle: -90,
      tickfont: { family: P.MONO, size: ticks.fontPx }, range: [-0.5, n - 0.5], fixedrange: true },
    yaxis: { range: [0, 1.05], fixedrange: true, title: { text: 'score', font: { size: 10 } }, gridcolor: '#eef0f3' },
    shapes: shapesFor('colscore-plot'),
  }, { ...P.CONFIG, displayModeBar: false });

  matrixView('blocks-plot').draw(mapSpec('blocks-plot'));
}

// ------------------------------------------------------------------------------------------
// corpus profile

async function loadProfile() {
  const body = $('profile-body');
  if (!S.info.run) {
    $('profile-sub').textContent = '';
    body.innerHTML = `<div class="empty" style="flex-direction:column;gap:6px">
      <div>No run loaded: corpus statistics of each head (p_repeat, p_same_sentence vs chance, distance histogram, anchor) appear here
      when the server is started with <code>headsim serve --run DIR</code>.</div></div>
      <div class="profile-plots"><div id="prof-text-attn"></div></div>`;
    renderTextAttn($('prof-text-attn'), null);
    return;
  }
  const seq = ++S.profileSeq;
  let prof;
  try { prof = await api('GET', `/api/heads/${S.layer}/${S.headNo}`); } catch (err) { showError(err); return; }
  if (seq !== S.profileSeq) return;
  S.profile = prof;
  $('profile-sub').textContent = `layer ${prof.layer}, head ${prof.head} over run ${prof.run}`;
  const st = prof.stats, rk = prof.ranks, lm = prof.layer_mean;
  const tile = (k, label, extra = '') => (k in st ? `<div class="tile" title="${esc(prof.descriptions[k] || '')}">
      <div class="k">${esc(label)}</div><div class="v">${fmt(st[k])}${extra}</div>
      <div class="r">rank ${rk[k] != null ? rk[k] : '—'} of ${prof.n_heads_total} · layer mean ${fmt(lm[k])}</div></div>` : '');
  const chance = 'p_same_sentence_chance' in st ? ` <span class="chance">chance ${fmt(st.p_same_sentence_chance)}</span>` : '';
  body.innerHTML = `<div class="tiles">
      ${tile('p_repeat', 'p_repeat')}
      ${tile('p_same_sentence', 'p_same_sentence', chance)}
      ${tile('p_repeat_same_sentence', 'p_repeat_same_sentence')}
      ${tile('anchor_fraction_mean', 'anchor_fraction_mean')}
      ${tile('mean_distance', 'mean distance')}
      ${tile('median_distance', 'median distance')}
      ${tile('n_pairs', 'n_pairs')}
    </div>
    <div class="profile-plots">
      <div id="prof-probs"></div><div id="prof-hist"></div><div id="prof-attn"></div><div id="prof-map"></div>
    </div>`;
  renderProbs(prof);
  renderHist(prof);
  renderTextAttn($('prof-attn'), prof);
  renderStatMap();
}

const smallLayout = (title, extra = {}) => ({
  margin: { l: 42, r: 10, t: 50, b: 48 }, font: { family: P.FONT, size: 11 },
  paper_bgcolor: 'rgba(0,0,0,0)', plot_bgcolor: '#ffffff',
  title: { text: title, font: { size: 12 }, x: 0.01, xanchor: 'left', y: 0.98, yanchor: 'top' },
  legend: { orientation: 'h', y: 1.0, yanchor: 'bottom', x: 0, xanchor: 'left', font: { size: 10 } },
  yaxis: { gridcolor: '#eef0f3', zeroline: false }, ...extra,
});

function renderProbs(prof) {
  const keys = ['p_repeat', 'p_repeat_same_sentence', 'p_same_sentence', 'p_same_sentence_chance', 'anchor_fraction_mean'].filter((k) => k in prof.stats);
  if (!keys.length) return;
  const short = { p_repeat: 'repeat', p_repeat_same_sentence: 'repeat,<br>same sent.', p_same_sentence: 'same<br>sentence',
    p_same_sentence_chance: 'chance', anchor_fraction_mean: 'anchor' };
  const labels = keys.map((k) => short[k] || k);
  Plotly.react($('prof-probs'), [
    { type: 'bar', name: `L${prof.layer} H${prof.head}`, x: labels, y: keys.map((k) => prof.stats[k]), marker: { color: '#4f46e5' } },
    { type: 'bar', name: `layer ${prof.layer} mean`, x: labels, y: keys.map((k) => prof.layer_mean[k]), marker: { color: '#c7d2fe' } },
  ], smallLayout('Probabilities (Figs 6, 8, 11a)', { barmode: 'group', yaxis: { range: [0, 1], gridcolor: '#eef0f3' },
    xaxis: { tickangle: 0, tickfont: { size: 9.5 } } }),
  { ...P.CONFIG, displayModeBar: false });
}

function renderHist(prof) {
  const div = $('prof-hist');
  const hist = prof.distance_hist;
  if (!hist) { div.innerHTML = '<div class="empty">No distance histogram (the run has no stats.nc).</div>'; return; }
  Plotly.react(div, [{ type: 'bar', x: hist.distance, y: hist.count, marker: { color: '#de4968' },
    hovertemplate: 'distance %{x}: %{y}<extra></extra>' }],
  smallLayout('Pair distances |i − j| (Fig 7)', { bargap: 0.05, margin: { l: 48, r: 10, t: 30, b: 40 },
    xaxis: { title: { text: 'distance (tokens)', font: { size: 10 } } } }), { ...P.CONFIG, displayModeBar: false });
}

function renderTextAttn(div, prof) {
  if (!div || !S.analysis) return;
  const keys = Object.keys(S.info.text_stats);
  const l = S.layer - 1, h = S.headNo - 1;
  const names = keys.map((k) => ({ attn_cls: '[CLS]', attn_sep: '[SEP]', attn_punct: 'punct.', attn_prev: 'previous', attn_next: 'next' }[k] || k));
  const traces = [{ type: 'bar', name: 'this text', x: names, y: keys.map((k) => S.analysis.heads[k][l][h]), marker: { color: '#6aaed6' } }];
  if (prof) traces.push({ type: 'bar', name: 'corpus (run)', x: names, y: keys.map((k) => prof.stats[k]), marker: { color: '#08306b' } });
  Plotly.react(div, traces, smallLayout(`Attention of layer ${S.layer}, head ${S.headNo} to…`, { barmode: 'group',
    yaxis: { range: [0, 1], gridcolor: '#eef0f3' }, xaxis: { tickangle: 0 } }),
    { ...P.CONFIG, displayModeBar: false });
}

function renderStatMap() {
  const div = $('prof-map');
  if (!div || !S.runRows || !S.info.run) return;
  const key = S.colorBy.startsWith('run:') ? S.colorBy : (S.info.run.stats.includes('p_repeat') ? 'run:p_repeat' : `run:${S.info.run.stats[0]}`);
  const g = statGrid(key);
  if (!g) return;
  const L = g.length, H = g[0].length;
  Plotly.react(div, [{
    type: 'heatmap', z: g, x: Array.from({ length: H }, (_, k) => k + 1), y: Array.from({ length: L }, (_, k) => k + 1),
    colorscale: P.VIRIDIS, hovertemplate: `layer %{y}, head %{x}: %{z:.3f}<extra>${esc(statLabel(key))}</extra>`,
    colorbar: { thickness: 9, outlinewidth: 0, tickfont: { size: 9 } },
  }], smallLayout(`${statLabel(key)} per head (run; Figs 6, 8)`, {
    margin: { l: 42, r: 10, t: 30, b: 40 },
    xaxis: { title: { text: 'head', font: { size: 10 } }, dtick: 1, fixedrange: true },
    yaxis: { title: { text: 'layer', font: { size: 10 } }, dtick: 1, autorange: 'reversed', fixedrange: true },
    shapes: [{ type: 'rect', x0: S.headNo - 0.5, x1: S.headNo + 0.5, y0: S.layer - 0.5, y1: S.layer + 0.5, line: { color: '#ef4444', width: 2.5 } }],
  }), { ...P.CONFIG, displayModeBar: false });
  if (!div.dataset.wired) {
    div.dataset.wired = '1';
    div.on('plotly_click', (ev) => { const p = ev.points && ev.points[0]; if (p) selectHead(p.y, p.x); });
  }
}

// expose a little state for tests and the console
window.headsim = { state: S, selectHead, analyze, panels: VIEWS };

init();
