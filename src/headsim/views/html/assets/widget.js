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

/** Bytes of an uncompressed base64 string. */
function rawBytes(b64) {
  return Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
}

/** The matrices of a payload, one head at a time: ``load(l, h)`` inflates a head's chunk when it is first
 * opened (the last few kept), so a page of a thousand heads is ready at once. Accessors take the loaded head
 * and 0-based positions; the pair counts of every head at every slider step come precomputed. */
export function matrices(data) {
  const { H, n } = data;
  const levels = data.attention.levels, steps = data.similarity.steps;
  const rowStart = new Int32Array(n);
  for (let i = 0; i < n; i++) rowStart[i] = i * n - (i * (i + 1)) / 2 - i - 1;
  const counts = new Int32Array(rawBytes(data.similarity.counts).buffer);  // [L, H, steps + 2], little-endian
  const cache = new Map();
  const q = (hd, i, j) => {
    if (i === j) return -1;
    if (i > j) [i, j] = [j, i];
    return hd.sim[rowStart[i] + j];
  };
  return {
    /** Head (l, h): {l, h, attn, sim}, inflated once. */
    async load(l, h) {
      const k = l * H + h;
      if (!cache.has(k)) {
        const [attn, sim] = await Promise.all([decodeBytes(data.attention.heads[k]), decodeBytes(data.similarity.heads[k])]);
        cache.set(k, { l, h, attn, sim });
        if (cache.size > 32) cache.delete(cache.keys().next().value);
      }
      return cache.get(k);
    },
    attention: (hd, i, j) => {
      const k = i * n + j;
      const v = (k & 1 ? hd.attn[k >> 1] & 15 : hd.attn[k >> 1] >> 4) / levels;  // two values a byte
      return v * v;
    },
    similarityLevel: q,
    similarity: (hd, i, j) => { const k = q(hd, i, j); return k < 0 ? 0 : k / steps; },
    above: (hd, i, j, t) => q(hd, i, j) >= Math.round(t * steps),  // common.js isHigh (S > t) on the levels
    pairCount: (l, h, t) => counts[(l * H + h) * (steps + 2) + Math.max(0, Math.min(steps + 1, Math.round(t * steps)))],
  };
}

/** The payload's thumbnails of ``kind`` ('similarity' | 'attention') as thumb(l, h) → {size, values in [0, 1]}. */
async function thumbnails(data, kind) {
  const { L, H } = data, s = data.thumbs.size, bytes = await decodeBytes(data.thumbs[kind]);
  const out = [];
  for (let l = 0; l < L; l++) {
    const row = [];
    for (let h = 0; h < H; h++) {
      const values = new Float32Array(s * s), o = (l * H + h) * s * s;
      for (let k = 0; k < s * s; k++) values[k] = bytes[o + k] / 255;
      row.push({ size: s, values });
    }
    out.push(row);
  }
  return out;
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
  const M = matrices(data);
  const thumbs = {};
  try {
    thumbs.similarity = await thumbnails(data, 'similarity');
  } catch (err) {
    root.dataset.mounted = 'failed';
    const note = document.createElement('div');
    note.className = 'hsv-error';
    note.textContent = `interactive view unavailable in this browser (${err}); the static image stays.`;
    root.append(note);
    return;
  }
  const fallback = root.querySelector('.hsv-fallback');
  if (fallback) fallback.remove();
  const box = document.createElement('div');
  box.className = 'hsv-app';
  box.innerHTML = TEMPLATE;
  root.append(box);
  const $ = (cls) => box.querySelector(`.${cls}`);
  const $$ = (cls) => Array.from(box.querySelectorAll(`.${cls}`));
  const { L, H, n, labels } = data;
  const binned = data.unit === 'bins';
  const pairWord = binned ? 'bin pairs' : 'pairs';
  const S = { l: data.init.layer, h: data.init.head, t: data.init.threshold, kind: 'similarity',
    colorBy: data.init.color_by, hover: null, grid: null, hd: null };

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

  // a binned overview: the words of each bin (its tokens), for the token strip, the pair table and the readout
  const binTokens = Array.from({ length: n }, () => []);
  if (binned && data.tokens && data.token_bins) data.token_bins.forEach((b, k) => binTokens[b].push(k));
  const words = (b, max = 60) => {
    if (!binned || !data.tokens) return labels[b];
    const text = binTokens[b].map((k) => data.tokens[k]).join(' ');
    return text.length > max ? `${text.slice(0, max - 1)}…` : text;
  };
  const where = (b) => (binned ? `${labels[b]} “${words(b, 40)}”` : `${b}:${labels[b]}`);

  function statGrid() {
    if (S.colorBy === 'none') return null;
    if (S.colorBy === 'pairs') return Array.from({ length: L }, (_, l) => Array.from({ length: H }, (_, h) => M.pairCount(l, h, S.t)));
    return data.stats[S.colorBy].grid;
  }
  function statLabel() {
    return S.colorBy === 'pairs' ? `pairs > ${S.t.toFixed(2)}` : (data.stats[S.colorBy] || { label: '' }).label;
  }

  /** The grid takes the room the root leaves: beside the maps when the root is wide, its whole width else. */
  function drawGrid() {
    const width = root.clientWidth || 900;
    const room = width >= 1100 ? Math.min(560, Math.floor(width * 0.42)) : Math.min(560, width - 8);
    S.grid = D.drawModelView($('hsv-grid'), $('hsv-colorbar'), { L, H, width: room, height: Math.max(260, Math.min(room, 640)),
      thumb: (l, h) => thumbs[S.kind][l][h], kind: S.kind, stat: statGrid(), label: statLabel(), selected: { l: S.l, h: S.h } });
    GRIDS.set($('hsv-grid'), S.grid);
  }

  /** The range of cells the maps show now ({r0, r1, c0, c1}, end-exclusive). */
  function shown() {
    return maps.mask.range || { r0: 0, r1: n, c0: 0, c1: n };
  }

  /** Pairs i < j above the threshold among the cells shown (what the mask panel draws). */
  function shownPairs(hd, t) {
    const { r0, r1, c0, c1 } = shown(), out = [];
    for (let i = r0; i < r1; i++) for (let j = Math.max(c0, i + 1); j < c1; j++) if (M.above(hd, i, j, t)) out.push([i, j]);
    return out;
  }

  /** Open head (S.l, S.h): inflate its chunk if needed, then draw it. */
  async function openHead() {
    const want = [S.l, S.h];
    const hd = await M.load(S.l, S.h);
    if (want[0] !== S.l || want[1] !== S.h) return;
    S.hd = hd;
    drawHead();
  }

  function drawHead() {
    const { t } = S, hd = S.hd;
    if (!hd) return;
    const side = Math.max(150, Math.min(300, 3 * n));
    const labelled = n <= 200 ? labels : [];
    const cross = S.hover ? { i: S.hover.i, j: S.hover.j } : null;
    let peak = 0;
    for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) peak = Math.max(peak, M.attention(hd, i, j));
    const as = peak > 0 ? 1 / Math.sqrt(peak) : 0;
    maps.attn.draw({ n, side, labels: labelled, scale: C.BLUES, cross,
      value: (i, j) => Math.sqrt(M.attention(hd, i, j)) * as });
    maps.sim.draw({ n, side, labels: labelled, scale: C.MAGMA, cross, value: (i, j) => M.similarity(hd, i, j) });
    maps.mask.draw({ n, side, labels: labelled, scale: C.MASK, cross, value: (i, j) => (M.above(hd, i, j, t) ? 1 : 0) });
    const count = M.pairCount(hd.l, hd.h, t);
    const zoomed = !!maps.mask.range;
    const inView = zoomed ? shownPairs(hd, t).length : count;
    $('hsv-title').innerHTML = `<b>Layer ${hd.l + 1}, head ${hd.h + 1}</b> <span class="hsv-muted">· ${n} ${data.unit} · ${count} ${pairWord} with S &gt; ${t.toFixed(2)}</span>`;
    $('hsv-count').textContent = `${inView} ${pairWord} (i < j)` + (zoomed ? ' in the cells shown' : '');
    root.dataset.count = String(inView);
    for (const el of $$('hsv-thr-value')) el.textContent = t.toFixed(2);
    root.dataset.layer = String(hd.l + 1);
    root.dataset.head = String(hd.h + 1);
    renderPairs();
    showTokens();
    shadeTokens();
  }

  function renderPairs() {
    const { t } = S, hd = S.hd;
    const pairs = shownPairs(hd, t).map(([i, j]) => [i, j, M.similarity(hd, i, j)]);
    pairs.sort((a, b) => b[2] - a[2] || a[0] - b[0] || a[1] - b[1]);
    box.querySelector('.hsv-pairs thead').innerHTML = binned
      ? '<tr><th>tokens of bin i</th><th>tokens of bin j</th><th>bin i (positions)</th><th>bin j (positions)</th><th>mean S</th></tr>'
      : '<tr><th>token_i</th><th>token_j</th><th>i</th><th>j</th><th>S</th></tr>';
    box.querySelector('.hsv-pairs tbody').innerHTML = pairs.slice(0, MAX_ROWS).map(([i, j, v]) => `<tr data-i="${i}" data-j="${j}">`
      + `<td>${esc(words(i))}</td><td>${esc(words(j))}</td><td>${esc(binned ? labels[i] : i)}</td><td>${esc(binned ? labels[j] : j)}</td><td>${v.toFixed(2)}</td></tr>`).join('')
      || `<tr><td colspan="5">No pair above ${t.toFixed(2)}${maps.mask.range ? ' in the cells shown' : ''}: lower the threshold.</td></tr>`;
    $('hsv-pair-note').textContent = `layer ${hd.l + 1}, head ${hd.h + 1}: ${pairs.length} ${pairWord} above ${t.toFixed(2)}`
      + (maps.mask.range ? ' in the cells shown' : '')
      + (pairs.length > MAX_ROWS ? ` (the ${MAX_ROWS} most similar listed)` : '') + ` · S to ${fmt(1 / data.similarity.steps, 2)}`;
  }

  // the token strip: a window's tokens (a binned overview: its words, each hovering its bin), those of the
  // zoomed range only when the maps are zoomed
  const tokenEls = [];
  const tokBox = $('hsv-tokens');
  const strip = binned && data.tokens ? data.tokens : labels;
  const frag = document.createDocumentFragment();
  strip.forEach((tok, k) => {
    const at = binned && data.tokens ? data.token_bins[k] : k;
    const el = document.createElement('span');
    el.className = 'hsv-tok' + (data.special && data.special[k] ? ' hsv-special' : '')
      + (data.sentences && data.sentences[k] >= 0 ? ` hsv-sent${data.sentences[k] % 2}` : '');
    el.textContent = tok;
    el.title = binned ? `${k}: ${tok} (bin ${labels[at]})` : `${k}: ${tok}`;
    el.dataset.at = String(at);
    frag.append(el);
    tokenEls.push(el);
  });
  tokBox.append(frag);
  tokBox.addEventListener('mouseover', (ev) => {
    const el = ev.target.closest('.hsv-tok');
    if (!el) return;
    const i = Number(el.dataset.at);
    if (S.hover && S.hover.i === i && S.hover.j == null) return;
    S.hover = { i, j: null, src: 'text' };
    drawHead();
  });
  tokBox.addEventListener('mouseleave', () => { S.hover = null; drawHead(); });
  const byPosition = Array.from({ length: n }, () => []);
  tokenEls.forEach((el) => byPosition[Number(el.dataset.at)].push(el));

  function showTokens() {
    const r = maps.mask.range;
    for (const el of tokenEls) {
      const a = Number(el.dataset.at);
      el.hidden = !!r && !((a >= r.r0 && a < r.r1) || (a >= r.c0 && a < r.c1));
    }
  }

  function shadeTokens() {
    for (const el of tokenEls) { el.classList.remove('hsv-hl'); el.style.removeProperty('background-color'); }
    const hv = S.hover, hd = S.hd;
    if (!hv || !hd) return;
    for (const el of byPosition[hv.i]) el.classList.add('hsv-hl');
    if (hv.j != null) for (const el of byPosition[hv.j]) el.classList.add('hsv-hl');
    for (let k = 0; k < n; k++) {
      if (k === hv.i) continue;
      const v = M.similarity(hd, hv.i, k);
      const a = C.similarityShade(v, M.above(hd, hv.i, k, S.t));
      if (a > 0.02) for (const el of byPosition[k]) el.style.backgroundColor = `rgba(222,73,104,${a.toFixed(3)})`;
    }
    const mean = binned ? 'mean ' : '';
    $('hsv-hover').textContent = hv.j == null ? where(hv.i)
      : `${where(hv.i)} → ${where(hv.j)} · ${mean}attention ${fmt(M.attention(hd, hv.i, hv.j), 4)}`
        + ` · ${mean}S ${fmt(M.similarity(hd, hv.i, hv.j), 2)}`;
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
      onZoom: (range, view) => { for (const v of Object.values(maps)) if (v !== view) v.setRange(range); drawHead(); },
    });
  }
  MAPS.set(root, maps);
  const grid = $('hsv-grid');
  grid.addEventListener('click', (ev) => {
    const at = D.tileAt(S.grid, ...point(grid, ev));
    if (!at) return;
    S.l = at.l; S.h = at.h; S.hover = null;
    drawGrid(); openHead();
  });
  grid.addEventListener('mousemove', (ev) => {
    const at = D.tileAt(S.grid, ...point(grid, ev));
    const g = at && statGrid();
    $('hsv-status').innerHTML = at ? `<b>Layer ${at.l + 1}, head ${at.h + 1}</b> · ${M.pairCount(at.l, at.h, S.t)} ${pairWord} with S &gt; ${S.t.toFixed(2)}`
      + (g && S.colorBy !== 'pairs' ? ` · ${esc(statLabel())} = ${fmt(g[at.l][at.h])}` : '') : 'Click a head to open it.';
  });
  $('hsv-kind').addEventListener('change', async (e) => {
    S.kind = e.target.value;
    if (!thumbs[S.kind]) thumbs[S.kind] = await thumbnails(data, S.kind);
    drawGrid();
  });
  sel.addEventListener('change', (e) => { S.colorBy = e.target.value; drawGrid(); });
  $('hsv-threshold').addEventListener('input', (e) => { S.t = Number(e.target.value); drawHead(); if (S.colorBy === 'pairs') drawGrid(); });
  let width = root.clientWidth;
  window.addEventListener('resize', () => { if (root.clientWidth !== width) { width = root.clientWidth; drawGrid(); } });

  drawGrid();
  await openHead();
  root.dataset.mounted = 'done';
}
