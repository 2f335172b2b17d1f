// Small page helpers: element lookup, the status line, the error box, the tooltip, timing wrappers.
import { esc } from './plots.js';

export const $ = (id) => document.getElementById(id);

/** Show ``err`` ({error, fix} from the API, or anything) in the error box; null hides it. */
export function showError(err) {
  const box = $('error');
  if (!err) { box.hidden = true; box.textContent = ''; return; }
  box.innerHTML = `<b>${esc(err.error || String(err))}</b>` + (err.fix ? `<div class="fix">fix: ${esc(err.fix)}</div>` : '');
  box.hidden = false;
}

export function setStatus(text, busy = false) {
  const el = $('status');
  el.textContent = text;
  el.classList.toggle('busy', busy);
}

/** Show the tooltip with ``html`` next to mouse event ``e``, kept inside the window. */
export function showTooltip(e, html) {
  const tip = $('tooltip');
  tip.innerHTML = html;
  tip.hidden = false;
  const x = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
  const y = e.clientY + 16 + tip.offsetHeight > window.innerHeight ? e.clientY - tip.offsetHeight - 10 : e.clientY + 16;
  tip.style.left = `${x}px`;
  tip.style.top = `${y}px`;
}

export function hideTooltip() { $('tooltip').hidden = true; }

/** ``fn`` run at most once an animation frame. */
export function rafOnce(fn) {
  let pending = false;
  return (...args) => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; fn(...args); });
  };
}

export function debounce(fn, ms) {
  let t = null;
  return (...args) => { clearTimeout(t); t = setTimeout(() => fn(...args), ms); };
}
