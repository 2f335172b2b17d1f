// The text panel: the window's tokens over the original text (sentences alternately tinted, separators boxed),
// shaded by their similarity or attention to the hovered token; and the window picker.
import { similarityShade } from './plots.js';
import { $ } from './dom.js';
import { high, overview, store } from './state.js';

/** The window picker and the token count of store.analysis. */
export function renderWindowRow() {
  const a = store.analysis;
  $('window-row').hidden = a.n_windows <= 1;
  const sel = $('window-select');
  sel.innerHTML = '';
  for (let w = 0; w < a.n_windows; w++) sel.add(new Option(String(w), String(w)));
  sel.value = String(a.window);
  $('window-note').textContent = `of 0–${a.n_windows - 1}`;
  $('token-count').textContent = `${a.n_tokens} · window ${a.window}`;
}

/** One <span class="tok"> a token (store.tokenEls), the text between tokens kept as it was written. */
export function renderTokens() {
  const a = store.analysis;
  const box = $('token-text');
  box.textContent = '';
  const frag = document.createDocumentFragment();
  store.tokenEls = [];
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
    store.tokenEls.push(span);
    frag.append(span);
    if (a.special[k] && k === 0) frag.append(document.createTextNode(' '));
  }
  box.append(frag);
}

/** Highlight hover ``h``'s tokens and shade the others by their attention (an attention map's hover, or the
 * text's in attention mode) or similarity to token h.i. */
export function shadeTokens(h) {
  const els = store.tokenEls;
  for (const el of els) { el.classList.remove('hl-i', 'hl-j'); el.style.removeProperty('--a'); }
  if (!h || els.length !== store.head.n_tokens || overview()) return;
  if (els[h.i]) els[h.i].classList.add('hl-i');
  if (h.j !== h.i && els[h.j]) els[h.j].classList.add('hl-j');
  const useAttn = h.src === 'attn-plot' || (h.src === 'text' && store.shadeMode === 'attention');
  const row = (useAttn ? store.head.attention : store.head.similarity)[h.i];
  let peak = 0;
  row.forEach((v, k) => { if (k !== h.i && v > peak) peak = v; });
  const scale = useAttn ? (peak > 0 ? 1 / peak : 0) : 1;
  row.forEach((v, k) => {
    if (k === h.i) return;
    const x = Math.max(0, Math.min(1, v * scale));
    const a = useAttn ? 0.85 * x : similarityShade(x, high(v));
    if (a > 0.02) els[k].style.setProperty('--a', a.toFixed(3));
  });
}

/** Box the open head's separator columns in the text. */
export function markSeparators() {
  const cols = new Set(store.head ? store.head.separators.columns : []);
  store.tokenEls.forEach((el, k) => el.classList.toggle('sep', cols.has(k)));
}

/** Mark the pinned token. */
export function markPinned() {
  for (const el of store.tokenEls) el.classList.remove('pinned');
  if (store.pinned && store.tokenEls[store.pinned.i]) store.tokenEls[store.pinned.i].classList.add('pinned');
}
