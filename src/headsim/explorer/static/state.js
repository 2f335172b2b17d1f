// The explorer page's one store: everything the page knows and shows is a field here, read and written by the
// modules (no other mutable module state). Layers and heads are 1-based (as in the API); token positions 0-based.
import { isHigh } from './plots.js';

export const store = {
  // server replies
  info: null,       // /api/info: model, run, defaults, limits, stat descriptions
  examples: [],     // /api/examples
  analysis: null,   // /api/analyze of the current text and window
  head: null,       // /api/head of the open head
  runRows: null,    // /api/heads rows (a loaded run's per-head statistics) or null
  profile: null,    // /api/heads/{layer}/{head}
  exact: null,      // a long window's zoomed region (/api/zoom): exact values over token positions

  // what the user chose
  layer: 1, headNo: 1,          // the open head
  threshold: 0.3,               // high-similarity threshold (isHigh)
  sepLayer: null, sepThreshold: 0.5,
  thumbKind: 'similarity',      // model view thumbnails: 'similarity' | 'attention'
  colorBy: 'pairs',             // model view frames: 'none' | 'pairs' | 'text:<stat>' | 'run:<stat>'
  shadeMode: 'similarity',      // tokens shaded by 'similarity' | 'attention' to the hovered one
  showSeps: true,               // separator lines on the maps
  sort: { key: 'index_i', dir: 1 },  // pair table order

  // what the page shows now
  pairs: [],        // the pair table's rows {i, j, v}, sorted
  hover: null,      // highlighted token or pair {i, j, src} (src: 'text', 'table' or a panel id)
  pinned: null,     // a clicked token or pair that stays highlighted
  ranges: null,     // the matrix panels' zoom {r0, r1, c0, c1} (end-exclusive) or null
  grid: null,       // geometry of the model view's last drawing (draw.js drawGrid)
  thumbCache: null, // decoded thumbnails of the current analysis, by kind
  tokenEls: [],     // the token <span>s of the text panel, by position
  panels: {},       // matrix panels by element id (draw.js MatrixView)

  // request counters: a reply older than the latest request is dropped
  headSeq: 0, profileSeq: 0, analyzeSeq: 0,
};

/** Rows shown in the pair table at most. */
export const MAX_ROWS = 500;

/** Whether pair (i, j) of the open head is a high-similarity pair at the current threshold: common.js isHigh,
 * the one rule of every view and of the Python statistics (similarity > threshold, strictly). */
export function high(similarity) {
  return isHigh(similarity, store.threshold);
}

/** Whether the open head is a long window's binned overview (view.unit 'bins'): its matrices are means over
 * position bins; a dragged rectangle asks /api/zoom for exact values (store.exact). */
export function overview() {
  return !!(store.head && store.head.view && store.head.view.unit === 'bins');
}

/** The bin of token position p in the overview. */
export function binOf(p) {
  const b = store.head.view.bins;
  let lo = 0, hi = b.length - 1;
  while (lo < hi) { const m = (lo + hi + 1) >> 1; if (b[m][0] <= p) lo = m; else hi = m - 1; }
  return lo;
}

/** What lower modules call upwards (a panel's hover, a click on a head): set once by main.js. */
export const actions = {
  selectHead: (layer, head) => {},   // open head (layer, head), 1-based
  setHover: (h) => {},               // highlight {i, j, src} (null: the pinned one or nothing)
  togglePin: (h) => {},              // pin or unpin {i, j, src}
  zoom: (range) => {},               // a panel's dragged rectangle {r0, r1, c0, c1} or null (all)
};
