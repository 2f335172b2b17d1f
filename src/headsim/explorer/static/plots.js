// Plotly settings of the explorer's bar and line charts (separator scores, corpus profile); Plotly is the
// vendored global (static/vendor/plotly.min.js). Matrix panels and the model view are drawn by the shared
// canvas renderer.

// Colour scales, colours and token ticks are the shared drawing code of the explorer and the notebook
// displays (headsim/views/html/assets/draw.js, served as /static/shared/draw.js).
export { FONT, MONO, MAGMA, BLUES, VIRIDIS, sqrtScale, BLUES_SQRT, MASK, HL, SEP, colorAt, shortTok, tickSet, esc, fmt,
  drawGrid, tileAt, drawColorbar, MatrixView } from './shared/draw.js';

export const CONFIG = {
  displaylogo: false, responsive: true, scrollZoom: false,
  modeBarButtonsToRemove: ['select2d', 'lasso2d', 'autoScale2d', 'toggleSpikelines'],
  toImageButtonOptions: { format: 'png', scale: 2 },
};
