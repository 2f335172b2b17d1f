// headsim explorer: the page's entry module. Talks only to this server's JSON API (/api/...; see /docs).
// Layers and heads are 1-based everywhere on the page (as in the API); token positions 0-based.
// The modules: state (the one store), api, dom, tokens (text panel), heads (model view), matrices (the head's
// panels), pairs (table), separators, hover (linked highlighting), profile (corpus), controller (actions).
import { api } from './api.js';
import {
  analyze, loadHead, selectHead, showPairs, stepWindow, syncHeadInputs, syncLabels, thresholdMoved, zoom,
} from './controller.js';
import { $, debounce, rafOnce, showError } from './dom.js';
import { fillColorBy, renderThumbs } from './heads.js';
import { applyHover, setHover, togglePin } from './hover.js';
import { renderMaps } from './matrices.js';
import { downloadCsv, sortBy } from './pairs.js';
import { renderStatMap } from './profile.js';
import * as P from './plots.js';
import { actions, store } from './state.js';

Object.assign(actions, { selectHead, setHover, togglePin, zoom });

/** The model and run lines, the controls' ranges and defaults, the examples; then the first example. */
async function init() {
  wireControls();
  try {
    store.info = await api('GET', '/api/info');
  } catch (err) { showError(err); return; }
  const info = store.info, m = info.model;
  $('model-line').textContent = `model ${m.name}` + (m.commit ? ` @ ${m.commit.slice(0, 12)}` : '') +
    ` · ${m.class} · ${m.n_layers} layers × ${m.n_heads} heads · d_head ${m.d_head} · ${m.device}`;
  // a model given as an object: its class, adapters and weights fingerprint, one per line
  const provenance = (rows) => (rows || []).map(([k, v]) => `\n${k}: ${v}`).join('');
  $('model-line').title = `${m.source}` + (m.commit ? ` at commit ${m.commit}` : '') +
    ` (${m.model_type}, ${m.dtype}, max ${m.max_seq_len} tokens)` + provenance(m.provenance);
  $('numbering').textContent = info.numbering.charAt(0).toUpperCase() + info.numbering.slice(1);
  $('n-layers').textContent = m.n_layers;
  $('n-heads').textContent = m.n_heads;
  $('layer-input').max = m.n_layers;
  $('head-input').max = m.n_heads;
  $('seq-len').max = info.limits.max_seq_len;
  $('seq-len').value = info.defaults.seq_len;
  store.threshold = info.defaults.threshold;
  store.sepThreshold = info.defaults.sep_threshold;
  store.sepLayer = info.defaults.sep_layer;
  store.layer = m.n_layers;
  store.headNo = 1;
  $('threshold').value = store.threshold;
  $('sep-threshold').value = store.sepThreshold;
  syncLabels();
  const sel = $('sep-layer');
  for (let l = 1; l <= m.n_layers; l++) sel.add(new Option(`${l}${l === m.n_layers ? ' (last)' : ''}`, String(l)));
  sel.value = String(store.sepLayer);
  syncHeadInputs();

  const run = info.run;
  const runLine = $('run-line');
  if (run) {
    runLine.textContent = `run ${run.name} · ${run.n_layers}×${run.n_heads} heads` + (run.model ? ` · ${run.model}` : '') +
      (run.commit ? ` @ ${run.commit.slice(0, 12)}` : '');
    if (run.commit) runLine.title = `made with ${run.model} at commit ${run.commit}`;
    if (run.provenance && run.provenance.length) runLine.title = `made with ${run.model}` + provenance(run.provenance);
    runLine.classList.add('loaded');
    if (run.warnings && run.warnings.length) {
      runLine.classList.add('warn');
      runLine.textContent += ' ⚠';
      runLine.title = run.warnings.join('\n');
    }
    try { store.runRows = (await api('GET', '/api/heads')).rows; } catch (err) { showError(err); }
  } else {
    runLine.textContent = 'no run loaded (headsim serve --run DIR adds corpus statistics)';
  }
  fillColorBy();

  try {
    store.examples = (await api('GET', '/api/examples')).examples;
  } catch (err) { showError(err); }
  const ex = $('example-select');
  const groups = {};
  for (const e of store.examples) {
    const label = e.source === 'run' ? `Windows of run ${run ? run.name : ''}` : 'Built-in paragraphs';
    if (!groups[label]) { groups[label] = document.createElement('optgroup'); groups[label].label = label; ex.append(groups[label]); }
    groups[label].append(new Option(e.title, e.id));
  }
  // the first example only into an empty box that nobody has analysed yet: a text typed or pasted while the
  // examples were on their way stays, as pasted
  if (store.examples.length && !$('text-input').value.trim() && store.analyzeSeq === 0) {
    ex.value = store.examples[0].id;
    $('text-input').value = store.examples[0].text;
    analyze(0);
  }
}

function wireControls() {
  $('analyze-btn').addEventListener('click', () => analyze(0));
  $('text-input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); analyze(0); }
  });
  $('text-input').addEventListener('input', () => { $('example-select').value = ''; });
  $('example-select').addEventListener('change', (e) => {
    const found = store.examples.find((x) => x.id === e.target.value);
    if (found) { $('text-input').value = found.text; analyze(0); }
  });
  $('window-select').addEventListener('change', (e) => analyze(Number(e.target.value)));
  $('win-prev').addEventListener('click', () => stepWindow(-1));
  $('win-next').addEventListener('click', () => stepWindow(1));

  const onThreshold = rafOnce(thresholdMoved);
  $('threshold').addEventListener('input', (e) => { store.threshold = Number(e.target.value); syncLabels(); onThreshold(); });
  $('sep-threshold').addEventListener('input', (e) => { store.sepThreshold = Number(e.target.value); syncLabels(); });
  $('sep-threshold').addEventListener('change', () => loadHead());
  $('sep-layer').addEventListener('change', (e) => { store.sepLayer = Number(e.target.value); loadHead(); });
  $('show-seps').addEventListener('change', (e) => { store.showSeps = e.target.checked; applyHover(); });
  $('shade-mode').addEventListener('change', (e) => { store.shadeMode = e.target.value; applyHover(); });
  $('color-by').addEventListener('change', (e) => { store.colorBy = e.target.value; renderThumbs(); renderStatMap(); });
  for (const b of document.querySelectorAll('[data-thumb]')) {
    b.addEventListener('click', () => {
      store.thumbKind = b.dataset.thumb;
      for (const x of document.querySelectorAll('[data-thumb]')) x.classList.toggle('on', x === b);
      renderThumbs();
    });
  }
  const onPick = () => selectHead(Number($('layer-input').value), Number($('head-input').value));
  $('layer-input').addEventListener('change', onPick);
  $('head-input').addEventListener('change', onPick);
  for (const th of document.querySelectorAll('#pair-table th')) {
    th.addEventListener('click', () => { sortBy(th.dataset.key); showPairs(); });
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
    if (['input', 'textarea', 'select'].includes(tag) || !store.info) return;
    const moves = { ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0] };
    if (e.key === 'Escape' && store.pinned) { togglePin(store.pinned, false); return; }
    if (moves[e.key]) {
      e.preventDefault();
      selectHead(store.layer + moves[e.key][0], store.headNo + moves[e.key][1]);
    }
  });
  window.addEventListener('resize', debounce(() => { renderThumbs(); renderMaps(); }, 150));
}

// a little state for tests and the console
window.headsim = { state: store, selectHead, analyze, panels: store.panels, tileAt: P.tileAt };

init();
