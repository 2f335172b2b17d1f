// Plotly settings of the explorer's bar and line charts (separator scores, corpus profile); Plotly is the
// vendored global (static/vendor/plotly.min.js). Matrix panels and the model view are drawn by the shared
// canvas renderer.

// Colour scales, colours, token ticks, the canvas panels and the high-similarity rule are the shared drawing
// code of the explorer and the notebook displays (headsim/views/html/assets/common.js and draw.js, served
// under /static/shared/).
export { FONT, MONO, MAGMA, BLUES, VIRIDIS, MASK, SEP, shortTok, tickSet, esc, fmt, isHigh, similarityShade }
  from './shared/common.js';
export { drawModelView, tileAt, MatrixView } from './shared/draw.js';

export const CONFIG = {
  displaylogo: false, responsive: true, scrollZoom: false,
  modeBarButtonsToRemove: ['select2d', 'lasso2d', 'autoScale2d', 'toggleSpikelines'],
  toImageButtonOptions: { format: 'png', scale: 2 },
};
