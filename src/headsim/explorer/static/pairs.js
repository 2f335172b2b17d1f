// The open head's high-similarity pairs (paper Fig 9): the pairs i < j above the threshold (state.js high:
// similarity > threshold, the rule of every view and of the Python statistics), as a sortable table and CSV.
import { esc } from './plots.js';
import { $ } from './dom.js';
import { MAX_ROWS, high, overview, store } from './state.js';

/** The high pairs {i, j, v} of the open head: all of a window's tokens, or a long window's zoomed region
 * (none in its binned overview). */
export function highPairs() {
  const pairs = [], E = store.exact;
  if (E) {
    for (let i = E.rows[0]; i < E.rows[1]; i++) {
      for (let j = Math.max(i + 1, E.cols[0]); j < E.cols[1]; j++) {
        const v = E.similarity[i - E.rows[0]][j - E.cols[0]];
        if (high(v)) pairs.push({ i, j, v });
      }
    }
  } else if (!overview()) {
    const sim = store.head.similarity, n = sim.length;
    for (let i = 0; i < n; i++) for (let j = i + 1; j < n; j++) if (high(sim[i][j])) pairs.push({ i, j, v: sim[i][j] });
  }
  return pairs;
}

/** Fill the table (store.pairs, sorted by store.sort; the first MAX_ROWS shown) and the pair counts. */
export function renderPairs() {
  if (!store.head) return;
  const tokens = store.head.tokens, t = store.threshold, E = store.exact, ov = overview();
  const pairs = highPairs();
  const { key, dir } = store.sort;
  const cmp = {
    token_i: (a, b) => tokens[a.i].localeCompare(tokens[b.i]),
    token_j: (a, b) => tokens[a.j].localeCompare(tokens[b.j]),
    index_i: (a, b) => a.i - b.i,
    index_j: (a, b) => a.j - b.j,
    similarity: (a, b) => a.v - b.v,
  }[key];
  pairs.sort((a, b) => dir * cmp(a, b) || a.i - b.i || a.j - b.j);
  store.pairs = pairs;
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
    + (E ? ` in tokens ${E.rows[0]}–${E.rows[1] - 1} × ${E.cols[0]}–${E.cols[1] - 1}` : '')
    + (pairs.length > MAX_ROWS ? ` (first ${MAX_ROWS} shown)` : '')
    + (ov ? ` · ${store.head.n_tokens} tokens shown on ${store.head.view.n} bins: drag a rectangle on a map for exact values and pairs` : '');
}

/** Sort the table by column ``key`` (again: the other way). */
export function sortBy(key) {
  store.sort = { key, dir: store.sort.key === key ? -store.sort.dir : (key === 'similarity' ? -1 : 1) };
}

/** Mark the rows of hover ``h``: a token's pairs, or one pair. */
export function highlightRows(h) {
  for (const tr of document.querySelectorAll('#pair-table tbody tr.hl')) tr.classList.remove('hl');
  if (!h) return;
  for (const tr of document.querySelectorAll('#pair-table tbody tr')) {
    const i = Number(tr.dataset.i), j = Number(tr.dataset.j);
    const match = h.src === 'text' ? (i === h.i || j === h.i) : ((i === h.i && j === h.j) || (i === h.j && j === h.i));
    if (match) tr.classList.add('hl');
  }
}

/** Download the table's pairs as CSV. */
export function downloadCsv() {
  const h = store.head;
  if (!h) return;
  const q = (s) => `"${String(s).replace(/"/g, '""')}"`;
  const lines = ['layer,head,token_i,token_j,index_i,index_j,similarity'];
  for (const p of store.pairs) lines.push([h.layer, h.head, q(h.tokens[p.i]), q(h.tokens[p.j]), p.i, p.j, p.v].join(','));
  const blob = new Blob([lines.join('\n') + '\n'], { type: 'text/csv' });
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = `pairs_L${h.layer}_H${h.head}_t${store.threshold.toFixed(2)}.csv`;
  a.click();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}
