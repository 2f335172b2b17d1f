// Separator columns and blocks (paper Fig 5): the summed attention each token receives in one layer as bars
// (Plotly), separators above the threshold in amber, and the block-averaged similarity panel.
import * as P from './plots.js';
import { $ } from './dom.js';
import { drawPanel } from './matrices.js';
import { store } from './state.js';

const Plotly = window.Plotly;

/** The bars' shapes: the threshold line and the hovered tokens' bands. */
function barShapes() {
  const h = store.hover;
  const shapes = [{ type: 'line', xref: 'paper', x0: 0, x1: 1, y0: store.head.separators.threshold,
    y1: store.head.separators.threshold, line: { color: P.SEP, width: 1, dash: 'dash' } }];
  if (!h) return shapes;
  const band = { type: 'rect', xref: 'x', yref: 'paper', y0: 0, y1: 1, fillcolor: 'rgba(8,145,178,0.18)', line: { width: 0 } };
  shapes.push({ ...band, x0: h.i - 0.5, x1: h.i + 0.5 });
  if (h.j !== h.i) shapes.push({ ...band, x0: h.j - 0.5, x1: h.j + 0.5 });
  return shapes;
}

/** Move the hovered tokens' bands on the bars. */
export function updateBarShapes() {
  const bars = $('colscore-plot');
  if (store.head && bars.data) Plotly.relayout(bars, { shapes: barShapes() });
}

/** The separator bars and the block-averaged similarity panel of the open head. */
export function renderBlocks() {
  const h = store.head, sep = h.separators, tokens = h.tokens, n = h.n_tokens;
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
    shapes: barShapes(),
  }, { ...P.CONFIG, displayModeBar: false });

  drawPanel('blocks-plot');
}
