// The corpus profile of the open head (a run loaded with `headsim serve --run DIR`): its statistics as tiles
// with rank and layer mean, probabilities, pair distances, attention targets and a statistic of every head
// (Plotly charts).
import * as P from './plots.js';
import { api } from './api.js';
import { $, showError } from './dom.js';
import { defaultRunStat, statGrid, statLabel } from './heads.js';
import { actions, store } from './state.js';

const Plotly = window.Plotly;
const plain = () => ({ ...P.CONFIG, displayModeBar: false });

/** Fetch and show the open head's profile (without a run: this text's attention targets only). */
export async function loadProfile() {
  const body = $('profile-body');
  if (!store.info.run) {
    $('profile-sub').textContent = '';
    body.innerHTML = `<div class="empty" style="flex-direction:column;gap:6px">
      <div>No run loaded: corpus statistics of each head (p_repeat, p_same_sentence vs chance, distance histogram, anchor) appear here
      when the server is started with <code>headsim serve --run DIR</code>.</div></div>
      <div class="profile-plots"><div id="prof-text-attn"></div></div>`;
    renderTextAttn($('prof-text-attn'), null);
    return;
  }
  const seq = ++store.profileSeq;
  let prof;
  try { prof = await api('GET', `/api/heads/${store.layer}/${store.headNo}`); } catch (err) { showError(err); return; }
  if (seq !== store.profileSeq) return;
  store.profile = prof;
  $('profile-sub').textContent = `layer ${prof.layer}, head ${prof.head} over run ${prof.run}`;
  const st = prof.stats, rk = prof.ranks, lm = prof.layer_mean;
  const tile = (k, label, extra = '') => (k in st ? `<div class="tile" title="${P.esc(prof.descriptions[k] || '')}">
      <div class="k">${P.esc(label)}</div><div class="v">${P.fmt(st[k])}${extra}</div>
      <div class="r">rank ${rk[k] != null ? rk[k] : '—'} of ${prof.n_heads_total} · layer mean ${P.fmt(lm[k])}</div></div>` : '');
  const chance = 'p_same_sentence_chance' in st ? ` <span class="chance">chance ${P.fmt(st.p_same_sentence_chance)}</span>` : '';
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
    xaxis: { tickangle: 0, tickfont: { size: 9.5 } } }), plain());
}

function renderHist(prof) {
  const div = $('prof-hist');
  const hist = prof.distance_hist;
  if (!hist) { div.innerHTML = '<div class="empty">No distance histogram (the run has no stats.nc).</div>'; return; }
  Plotly.react(div, [{ type: 'bar', x: hist.distance, y: hist.count, marker: { color: '#de4968' },
    hovertemplate: 'distance %{x}: %{y}<extra></extra>' }],
  smallLayout('Pair distances |i − j| (Fig 7)', { bargap: 0.05, margin: { l: 48, r: 10, t: 30, b: 40 },
    xaxis: { title: { text: 'distance (tokens)', font: { size: 10 } } } }), plain());
}

/** The open head's attention to [CLS], [SEP], punctuation, previous and next token: this text (and the run). */
export function renderTextAttn(div, prof) {
  if (!div || !store.analysis) return;
  const keys = Object.keys(store.info.text_stats);
  const l = store.layer - 1, h = store.headNo - 1;
  const names = keys.map((k) => ({ attn_cls: '[CLS]', attn_sep: '[SEP]', attn_punct: 'punct.', attn_prev: 'previous', attn_next: 'next' }[k] || k));
  const traces = [{ type: 'bar', name: 'this text', x: names, y: keys.map((k) => store.analysis.heads[k][l][h]), marker: { color: '#6aaed6' } }];
  if (prof) traces.push({ type: 'bar', name: 'corpus (run)', x: names, y: keys.map((k) => prof.stats[k]), marker: { color: '#08306b' } });
  Plotly.react(div, traces, smallLayout(`Attention of layer ${store.layer}, head ${store.headNo} to…`, { barmode: 'group',
    yaxis: { range: [0, 1], gridcolor: '#eef0f3' }, xaxis: { tickangle: 0 } }), plain());
}

/** Plotly's dtick for ``n`` numbered cells along ``px`` pixels, labels ``size`` px apart at least: 1, 2, 4, 5, 10 … */
function tickStep(n, px, size) {
  for (const k of [1, 2, 4, 5, 10, 20, 25, 50]) if (k * Math.max(px, 60) / n >= size) return k;
  return 100;
}

/** A run statistic of every head (the frame colour's when it is one), the open head outlined; a click opens one. */
export function renderStatMap() {
  const div = $('prof-map');
  if (!div || !store.runRows || !store.info.run) return;
  const key = store.colorBy.startsWith('run:') ? store.colorBy : defaultRunStat();
  const g = statGrid(key);
  if (!g) return;
  const L = g.length, H = g[0].length;
  Plotly.react(div, [{
    type: 'heatmap', z: g, x: Array.from({ length: H }, (_, k) => k + 1), y: Array.from({ length: L }, (_, k) => k + 1),
    colorscale: P.VIRIDIS, hovertemplate: `layer %{y}, head %{x}: %{z:.3f}<extra>${P.esc(statLabel(key))}</extra>`,
    colorbar: { thickness: 9, outlinewidth: 0, tickfont: { size: 9 } },
  }], smallLayout(`${statLabel(key)} per head (run; Figs 6, 8)`, {
    margin: { l: 42, r: 10, t: 30, b: 40 },
    xaxis: { title: { text: 'head', font: { size: 10 } }, dtick: tickStep(H, div.clientWidth - 60, 16), fixedrange: true },
    yaxis: { title: { text: 'layer', font: { size: 10 } }, dtick: tickStep(L, 220, 13), autorange: 'reversed', fixedrange: true },
    shapes: [{ type: 'rect', x0: store.headNo - 0.5, x1: store.headNo + 0.5, y0: store.layer - 0.5, y1: store.layer + 0.5, line: { color: '#ef4444', width: 2.5 } }],
  }), plain());
  if (!div.dataset.wired) {
    div.dataset.wired = '1';
    div.on('plotly_click', (ev) => { const p = ev.points && ev.points[0]; if (p) actions.selectHead(p.y, p.x); });
  }
}
