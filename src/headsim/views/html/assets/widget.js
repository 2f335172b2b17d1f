// headsim head explorer for one window: the layer × head grid coloured by a statistic; clicking a
// head shows its attention, its similarity matrix S, the high-similarity mask at the threshold slider,
// its token pairs and the tokens shaded by similarity. Reads the payload headsim.views.html writes
// (quantised matrices, zlib-compressed, base64). Shared by notebook displays and exported pages.
import * as C from './common.js';
import * as D from './draw.js';

const { esc, fmt } = C;

/** Bytes of a base64 string, inflated when ``zlib`` (the browser's own DecompressionStream: nothing loaded). */
export async function decodeBytes(b64, zlib = true) {
  const raw = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  if (!zlib) return raw;
  const stream = new Blob([raw]).stream().pipeThrough(new DecompressionStream('deflate'));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/** Accessors over the decoded matrices of a payload: attention and similarity of (l, h, i, j), 0-based. */
export function matrices(data, attn, sim) {
  const { L, H, n } = data;
  const levels = data.attention.levels, steps = data.similarity.steps;
  const nTri = (n * (n - 1)) / 2;
  const rowStart = new Int32Array(n);
  for (let i = 0; i < n; i++) rowStart[i] = i * n - (i * (i + 1)) / 2 - i - 1;
  const q = (l, h, i, j) => {
    if (i === j) return -1;
    if (i > j) [i, j] = [j, i];
    return sim[(l * H + h) * nTri + rowStart[i] + j];
  };
  // counts[l][h][k]: pairs i < j with S > k / steps (cumulative over the quantised levels)
  const counts = [];
  for (let l = 0; l < L; l++) {
    const row = [];
    for (let h = 0; h < H; h++) {
      const c = new Int32Array(steps + 2), base = (l * H + h) * nTri;
      for (let k = 0; k < nTri; k++) c[sim[base + k]] += 1;
      for (let k = steps; k >= 0; k--) c[k] += c[k + 1];
      row.push(c);
    }
    counts.push(row);
  }
  return {
    attention: (l, h, i, j) => {
      const k = ((l * H + h) * n + i) * n + j;
      const v = (k & 1 ? attn[k >> 1] & 15 : attn[k >> 1] >> 4) / levels;  // two values a byte
      return v * v;
    },
    similarityLevel: q,
    similarity: (l, h, i, j) => { const k = q(l, h, i, j); return k < 0 ? 0 : k / steps; },
    above: (l, h, i, j, t) => q(l, h, i, j) >= Math.round(t * steps),  // common.js isHigh (S > t) on the levels
    pairCount: (l, h, t) => counts[l][h][Math.max(0, Math.min(steps + 1, Math.round(t * steps)))],
  };
}

const TEMPLATE = `
<div class="hsv-top"><b class="hsv-name"></b> <span class="hsv-muted hsv-sub"></span></div>
<div class="hsv-controls">
  <label>thumbnails <select class="hsv-kind"><option value="similarity">similarity</option><option value="attention">attention</option></select></label>
  <label>frame colour <select class="hsv-colorby"></select></label>
  <label class="hsv-slider">similarity threshold <b class="hsv-thr-value"></b>
    <input class="hsv-threshold" type="range" max="1"></label>
</div>
<div class="hsv-body">
  <div class="hsv-gridbox">
    <canvas class="hsv-grid" aria-label="layer × head grid: click a head"></canvas>
    <canvas class="hsv-colorbar"></canvas>
    <div class="hsv-status hsv-muted">Click a head to open it.</div>
  </div>
  <div class="hsv-headbox">
    <div class="hsv-title"></div>
    <div class="hsv-maps">
      <figure><figcaption>Attention <span class="hsv-muted">query i (rows) → key j · √ colours</span></figcaption><div class="hsv-attn"></div></figure>
      <figure><figcaption>Similarity S <span class="hsv-muted">Z·Zᵀ normalised</span></figcaption><div class="hsv-sim"></div></figure>
      <figure><figcaption>S &gt; <b class="hsv-thr-value"></b> <span class="hsv-muted hsv-count"></span></figcaption><div class="hsv-mask"></div></figure>
    </div>
    <div class="hsv-hover hsv-muted">Hover a map or a token.</div>
  </div>
</div>
<div class="hsv-tokens"></div>
<details class="hsv-pairs-box" open><summary>High-similarity pairs <span class="hsv-muted hsv-pair-note"></span></summary>
  <div class="hsv-table-wrap"><table class="hsv-pairs"><thead><tr><th>token_i</th><th>token_j</th><th>i</th><th>j</th><th>S</th></tr></thead><tbody></tbody></table></div>
</details>`;

const MAX_ROWS = 300;
const GRIDS = new WeakMap();
const MAPS = new WeakMap();

/** The matrix panels ({attn, sim, mask}: draw.js MatrixView) of a mounted explorer (for tests and scripts). */
export function panels(root) {
  return MAPS.get(root) || null;
}

/** The geometry of the head grid last drawn on ``canvas`` (for tests and scripts driving the page). */
export function lastGrid(canvas) {
  return GRIDS.get(canvas) || null;
}

/** Build the explorer in ``root`` (an element holding a <script type="application/json" class="hsv-data">). */
export async function mount(root) {
  if (!root || root.dataset.mounted) return;
  root.dataset.mounted = 'pending';
  const data = JSON.parse(root.querySelector('script.hsv-data').textContent);
  let attn, sim;
  try {
    [attn, sim] = await Promise.all([decodeBytes(data.attention.b64), decodeBytes(data.similarity.b64)]);
  } catch (err) {
    root.dataset.mounted = 'failed';
    const note = document.createElement('div');
    note.className = 'hsv-error';
    note.textContent = `interactive view unavailable in this browser (${err}); the static image stays.`;
    root.append(note);
    return;
  }
  const M = matrices(data, attn, sim);
  const fallback = root.querySelector('.hsv-fallback');
  if (fallback) fallback.remove();
  const box = document.createElement('div');
  box.className = 'hsv-app';
  box.innerHTML = TEMPLATE;
  root.append(box);
  const $ = (cls) => box.querySelector(`.${cls}`);
  const $$ = (cls) => Array.from(box.querySelectorAll(`.${cls}`));
  const { L, H, n, labels } = data;
  const S = { l: data.init.layer, h: data.init.head, t: data.init.threshold, kind: 'similarity',
    colorBy: data.init.color_by, hover: null, grid: null };

  $('hsv-name').textContent = data.title;
  $('hsv-sub').textContent = data.subtitle || '';
  const sel = $('hsv-colorby');
  sel.add(new Option('none', 'none'));
  sel.add(new Option('pairs above threshold (this text)', 'pairs'));
  for (const [key, st] of Object.entries(data.stats)) sel.add(new Option(`${st.label} (${st.group})`, key));
  sel.value = S.colorBy in data.stats || S.colorBy === 'none' ? S.colorBy : 'pairs';
  S.colorBy = sel.value;
  const thr = $('hsv-threshold');  // the slider moves in the payload's exact steps of S
  thr.min = thr.step = String(1 / data.similarity.steps);
  S.t = Math.max(1, Math.round(S.t * data.similarity.steps)) / data.similarity.steps;  // a threshold between steps: the nearest
  $('hsv-threshold').value = S.t;

  const thumbs = { similarity: [], attention: [] };
  const SIZE = 32;
  for (let l = 0; l < L; l++) {
    thumbs.similarity.push([]); thumbs.attention.push([]);
    for (let h = 0; h < H; h++) {
      thumbs.similarity[l].push(D.thumbnail(n, (i, j) => M.similarity(l, h, i, j), SIZE));
      let peak = 0;
      for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) peak = Math.max(peak, M.attention(l, h, i, j));
      const s = peak > 0 ? 1 / Math.sqrt(peak) : 0;
      thumbs.attention[l].push(D.thumbnail(n, (i, j) => Math.sqrt(M.attention(l, h, i, j)) * s, SIZE));
    }
  }

  function statGrid() {
    if (S.colorBy === 'none') return null;
    if (S.colorBy === 'pairs') return Array.from({ length: L }, (_, l) => Array.from({ length: H }, (_, h) => M.pairCount(l, h, S.t)));
    return data.stats[S.colorBy].grid;
  }
  function statLabel() {
    return S.colorBy === 'pairs' ? `pairs > ${S.t.toFixed(2)}` : (data.stats[S.colorBy] || { label: '' }).label;
  }

  function drawGrid() {
    const tile = Math.max(26, Math.min(46, Math.floor(560 / H)));
    S.grid = D.drawModelView($('hsv-grid'), $('hsv-colorbar'), { L, H, tile, thumb: (l, h) => thumbs[S.kind][l][h],
      kind: S.kind, stat: statGrid(), label: statLabel(), selected: { l: S.l, h: S.h } });
    GRIDS.set($('hsv-grid'), S.grid);
  }

  function drawHead() {
    const { l, h, t } = S;
    const side = Math.max(150, Math.min(300, 3 * n));
    const labelled = n <= 200 ? labels : [];
    const cross = S.hover ? { i: S.hover.i, j: S.hover.j } : null;
    let peak = 0;
    for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) peak = Math.max(peak, M.attention(l, h, i, j));
    const as = peak > 0 ? 1 / Math.sqrt(peak) : 0;
    maps.attn.draw({ n, side, labels: labelled, scale: C.BLUES, cross,
      value: (i, j) => Math.sqrt(M.attention(l, h, i, j)) * as });
    maps.sim.draw({ n, side, labels: labelled, scale: C.MAGMA, cross, value: (i, j) => M.similarity(l, h, i, j) });
    maps.mask.draw({ n, side, labels: labelled, scale: C.MASK, cross, value: (i, j) => (M.above(l, h, i, j, t) ? 1 : 0) });
    const count = M.pairCount(l, h, t);
    $('hsv-title').innerHTML = `<b>Layer ${l + 1}, head ${h + 1}</b> <span class="hsv-muted">· ${n} ${data.unit} · ${count} pair${count === 1 ? '' : 's'} with S &gt; ${t.toFixed(2)}</span>`;
    $('hsv-count').textContent = `${count} pairs (i < j)`;
    for (const el of $$('hsv-thr-value')) el.textContent = t.toFixed(2);
    root.dataset.layer = String(l + 1);
    root.dataset.head = String(h + 1);
    renderPairs();
    shadeTokens();
  }

  function renderPairs() {
    const { l, h, t } = S, pairs = [];
    for (let i = 0; i < n; i++) for (let j = i + 1; j < n; j++) if (M.above(l, h, i, j, t)) pairs.push([i, j, M.similarity(l, h, i, j)]);
    pairs.sort((a, b) => b[2] - a[2] || a[0] - b[0] || a[1] - b[1]);
    box.querySelector('.hsv-pairs tbody').innerHTML = pairs.slice(0, MAX_ROWS).map(([i, j, v]) => `<tr data-i="${i}" data-j="${j}">`
      + `<td>${esc(labels[i])}</td><td>${esc(labels[j])}</td><td>${i}</td><td>${j}</td><td>${v.toFixed(2)}</td></tr>`).join('')
      || `<tr><td colspan="5">No pair above ${t.toFixed(2)}: lower the threshold.</td></tr>`;
    $('hsv-pair-note').textContent = `layer ${l + 1}, head ${h + 1}: ${pairs.length} above ${t.toFixed(2)}`
      + (pairs.length > MAX_ROWS ? ` (the ${MAX_ROWS} most similar shown)` : '') + ` · S to ${fmt(1 / data.similarity.steps, 2)}`;
  }

  const tokenEls = [];
  const tokBox = $('hsv-tokens');
  labels.forEach((tok, k) => {
    const el = document.createElement('span');
    el.className = 'hsv-tok' + (data.special && data.special[k] ? ' hsv-special' : '')
      + (data.sentences && data.sentences[k] >= 0 ? ` hsv-sent${data.sentences[k] % 2}` : '');
    el.textContent = tok;
    el.title = `${k}: ${tok}`;
    el.addEventListener('mouseenter', () => { S.hover = { i: k, j: null, src: 'text' }; drawHead(); });
    tokBox.append(el);
    tokenEls.push(el);
  });
  tokBox.addEventListener('mouseleave', () => { S.hover = null; drawHead(); });

  function shadeTokens() {
    for (const el of tokenEls) { el.classList.remove('hsv-hl'); el.style.removeProperty('background-color'); }
    const hv = S.hover;
    if (!hv) return;
    tokenEls[hv.i].classList.add('hsv-hl');
    if (hv.j != null && tokenEls[hv.j]) tokenEls[hv.j].classList.add('hsv-hl');
    for (let k = 0; k < n; k++) {
      if (k === hv.i) continue;
      const v = M.similarity(S.l, S.h, hv.i, k);
      const a = C.similarityShade(v, M.above(S.l, S.h, hv.i, k, S.t));
      if (a > 0.02) tokenEls[k].style.backgroundColor = `rgba(222,73,104,${a.toFixed(3)})`;
    }
    $('hsv-hover').textContent = hv.j == null ? `${hv.i}: ${labels[hv.i]}`
      : `${hv.i}:${labels[hv.i]} → ${hv.j}:${labels[hv.j]} · attention ${fmt(M.attention(S.l, S.h, hv.i, hv.j), 4)}`
        + ` · S ${fmt(M.similarity(S.l, S.h, hv.i, hv.j), 2)}`;
  }

  function point(canvas, ev) {
    const r = canvas.getBoundingClientRect();
    return [ev.clientX - r.left, ev.clientY - r.top];
  }
  // the three maps: shared canvas panels (draw.js), hovered, zoomed together by a dragged rectangle
  const maps = {};
  for (const key of ['attn', 'sim', 'mask']) {
    maps[key] = new D.MatrixView($(`hsv-${key}`), {
      onHover: (at) => {
        const next = at ? { i: at.i, j: at.j, src: key } : null;
        if ((next && S.hover && next.i === S.hover.i && next.j === S.hover.j) || (!next && !S.hover)) return;
        S.hover = next;
        drawHead();
      },
      onZoom: (range, view) => { for (const v of Object.values(maps)) if (v !== view) v.setRange(range); },
    });
  }
  MAPS.set(root, maps);
  const grid = $('hsv-grid');
  grid.addEventListener('click', (ev) => {
    const at = D.tileAt(S.grid, ...point(grid, ev));
    if (!at) return;
    S.l = at.l; S.h = at.h; S.hover = null;
    drawGrid(); drawHead();
  });
  grid.addEventListener('mousemove', (ev) => {
    const at = D.tileAt(S.grid, ...point(grid, ev));
    const g = at && statGrid();
    $('hsv-status').innerHTML = at ? `<b>Layer ${at.l + 1}, head ${at.h + 1}</b> · ${M.pairCount(at.l, at.h, S.t)} pairs with S &gt; ${S.t.toFixed(2)}`
      + (g && S.colorBy !== 'pairs' ? ` · ${esc(statLabel())} = ${fmt(g[at.l][at.h])}` : '') : 'Click a head to open it.';
  });
  $('hsv-kind').addEventListener('change', (e) => { S.kind = e.target.value; drawGrid(); });
  sel.addEventListener('change', (e) => { S.colorBy = e.target.value; drawGrid(); });
  $('hsv-threshold').addEventListener('input', (e) => { S.t = Number(e.target.value); drawHead(); if (S.colorBy === 'pairs') drawGrid(); });

  drawGrid();
  drawHead();
  root.dataset.mounted = 'done';
}
