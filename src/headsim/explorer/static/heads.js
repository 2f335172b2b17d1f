// The model view: every head's thumbnail (layers as rows, heads as columns), drawn by the shared canvas code
// (draw.js drawModelView, as in the notebook displays), frames coloured by a statistic of this text or of the
// loaded run, the open head outlined in red.
import * as P from './plots.js';
import { $ } from './dom.js';
import { actions, store } from './state.js';

const HINT = 'Click a head to open it. Keys: ← → head, ↑ ↓ layer.';

/** The "frame colour" choices: this text's statistics, and the run's when one is loaded (default p_repeat). */
export function fillColorBy() {
  const info = store.info, sel = $('color-by');
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
  for (const [k, d] of Object.entries(info.text_stats)) add(gText, `text:${k}`, k, d);
  sel.append(gText);
  if (store.runRows && info.run) {
    const gRun = document.createElement('optgroup');
    gRun.label = `Run ${info.run.name} (corpus)`;
    for (const k of info.run.stats) add(gRun, `run:${k}`, k, info.head_stats[k] || '');
    sel.append(gRun);
    store.colorBy = defaultRunStat();
  } else {
    store.colorBy = 'pairs';
  }
  sel.value = store.colorBy;
}

/** The run statistic shown when none is chosen: p_repeat, else the first. */
export function defaultRunStat() {
  const stats = store.info.run.stats;
  return stats.includes('p_repeat') ? 'run:p_repeat' : `run:${stats[0]}`;
}

/** The number of high pairs of head (l, h), 0-based, in this window: the server's counts at the slider's
 * steps (high_counts[l][h][k]: pairs with similarity > k / count_steps). */
function pairsAbove(l, h) {
  const a = store.analysis;
  return a.heads.high_counts[l][h][Math.round(store.threshold * a.heads.count_steps)];
}

/** Statistic ``key`` ('pairs', 'text:…', 'run:…') as a layer × head grid (0-based), or null. */
export function statGrid(key) {
  const a = store.analysis;
  if (!a || key === 'none') return null;
  const L = a.model.n_layers, H = a.model.n_heads;
  if (key === 'pairs') return a.heads.high_counts.map((row, l) => row.map((_, h) => pairsAbove(l, h)));
  if (key.startsWith('text:')) return a.heads[key.slice(5)] || null;
  if (key.startsWith('run:') && store.runRows) {
    const name = key.slice(4);
    const g = Array.from({ length: L }, () => new Array(H).fill(null));
    for (const r of store.runRows) if (r.layer <= L && r.head <= H) g[r.layer - 1][r.head - 1] = r[name];
    return g;
  }
  return null;
}

export function statLabel(key) {
  if (key === 'pairs') return `pairs > ${store.threshold.toFixed(2)}`;
  return key.replace(/^(text|run):/, '');
}

/** Draw the model view of store.analysis (canvas made on first use, clicks open a head). */
export function renderThumbs() {
  const a = store.analysis;
  if (!a) return;
  const images = a.thumbnails[store.thumbKind];
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
      return store.grid ? P.tileAt(store.grid, ev.clientX - r.left, ev.clientY - r.top) : null;
    };
    canvas.addEventListener('click', (ev) => { const t = at(ev); if (t) actions.selectHead(t.l + 1, t.h + 1); });
    canvas.addEventListener('mousemove', (ev) => { const t = at(ev); if (t) describeThumb(t.l, t.h); else describeThumb(null); });
    canvas.addEventListener('mouseleave', () => describeThumb(null));
  }
  if (!store.thumbCache || store.thumbCache.analysis !== a) store.thumbCache = { analysis: a };
  if (!store.thumbCache[store.thumbKind]) {
    const size = Math.round(Math.sqrt(images[0][0].length));
    store.thumbCache[store.thumbKind] = images.map((row) => row.map((img) => ({ size, values: Float32Array.from(img, (v) => v / 100) })));
  }
  const thumbs = store.thumbCache[store.thumbKind];
  const width = Math.max(div.parentElement.clientWidth - 40, 320);
  const height = Math.max(260, Math.min(window.innerHeight * 0.6, 720));
  store.grid = P.drawModelView(canvas, bar, {
    L, H, width, height, thumb: (l, h) => thumbs[l][h], kind: store.thumbKind,
    stat: statGrid(store.colorBy), label: statLabel(store.colorBy), selected: { l: store.layer - 1, h: store.headNo - 1 },
  });
}

/** The line under the model view: head (l, h) (0-based) and its statistics; null: the hint. */
function describeThumb(l, h) {
  const el = $('thumb-status');
  if (l == null) { el.innerHTML = HINT; return; }
  const parts = [`<b>Layer ${l + 1}, head ${h + 1}</b>`, `${pairsAbove(l, h)} pairs with similarity > ${store.threshold.toFixed(2)} in this window`];
  const g = statGrid(store.colorBy);
  if (g && store.colorBy !== 'pairs') parts.push(`${statLabel(store.colorBy)} = ${P.fmt(g[l][h])}${store.colorBy.startsWith('run:') ? ' (corpus)' : ''}`);
  el.innerHTML = parts.join(' · ');
}
