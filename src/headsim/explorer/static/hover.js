// Linked highlighting: a hovered (or pinned) token or pair lights up in every map, the text, the pair table
// and the separator bars.
import { rafOnce } from './dom.js';
import { redrawPanels } from './matrices.js';
import { highlightRows } from './pairs.js';
import { updateBarShapes } from './separators.js';
import { store } from './state.js';
import { markPinned, shadeTokens } from './tokens.js';

/** Show store.hover everywhere. */
export function applyHover() {
  if (!store.head) return;
  redrawPanels();
  updateBarShapes();
  shadeTokens(store.hover);
  highlightRows(store.hover);
}

const scheduleHover = rafOnce(applyHover);
const samePair = (a, b) => (a === b) || (a && b && a.i === b.i && a.j === b.j && a.src === b.src);

/** Highlight ``h`` ({i, j, src}); null: the pinned token or pair, if any, stays highlighted. */
export function setHover(h) {
  h = h || store.pinned;
  if (samePair(store.hover, h)) return;
  store.hover = h;
  scheduleHover();
}

/** Pin ``h`` (again: unpin it); ``hovering``: the mouse is still on it. */
export function togglePin(h, hovering = true) {
  store.pinned = samePair(store.pinned, h) ? null : h;
  store.hover = hovering ? h : store.pinned;
  scheduleHover();
  markPinned();
}
