// headsim drawing code shared by the explorer (loaded as /static/shared/draw.js) and the notebook and
// exported views (inlined by headsim.views.html): a small canvas renderer for token × token matrices and the
// layer × head grid of thumbnails. Colours and formatting come from common.js.
import { FONT, MONO, MAGMA, BLUES, VIRIDIS, HL, SEP, colorAt, lut, tickSet } from './common.js';

function ratio() { return (typeof window !== 'undefined' && window.devicePixelRatio) || 1; }

function sizeCanvas(canvas, w, h) {
  const r = ratio();
  canvas.width = Math.round(w * r);
  canvas.height = Math.round(h * r);
  canvas.style.width = `${w}px`;
  canvas.style.height = `${h}px`;
  const ctx = canvas.getContext('2d');
  ctx.setTransform(r, 0, 0, r, 0, 0);
  return ctx;
}

/** An ImageBitmap-like canvas of rows × cols cells, cell (i, j) coloured by value(i, j) in [0, 1] (NaN: grey). */
function cellImage(rows, cols, value, table) {
  const img = document.createElement('canvas');
  img.width = cols;
  img.height = rows;
  const ctx = img.getContext('2d');
  const data = ctx.createImageData(cols, rows);
  const px = data.data;
  for (let i = 0; i < rows; i++) {
    for (let j = 0; j < cols; j++) {
      const v = value(i, j), o = 4 * (i * cols + j);
      if (Number.isFinite(v)) {
        const k = 3 * Math.max(0, Math.min(255, Math.round(v * 255)));
        px[o] = table[k]; px[o + 1] = table[k + 1]; px[o + 2] = table[k + 2];
      } else { px[o] = 229; px[o + 1] = 231; px[o + 2] = 235; }
      px[o + 3] = 255;
    }
  }
  ctx.putImageData(data, 0, 0);
  return img;
}

/**
 * Draw an n × n matrix on ``canvas`` with token tick labels.
 * opts: { n, value(i, j) → [0, 1], scale, labels, side (px of the matrix), range: {r0, r1, c0, c1} (the rows
 * and columns shown, end-exclusive; default all), lines (positions drawn as dotted separator lines),
 * cross: {i, j} (a highlighted row / column), pair: {i, j} (one outlined cell) }. Returns the geometry for cellAt().
 */
export function drawMatrix(canvas, opts) {
  const n = opts.n, labels = opts.labels || [];
  const { r0, r1, c0, c1 } = opts.range || { r0: 0, r1: n, c0: 0, c1: n };
  const side = opts.side || 300;
  const margin = labels.length ? 78 : 4;
  const ctx = sizeCanvas(canvas, side + margin + 4, side + margin + 4);
  const x0 = margin, y0 = 2, cw = side / (c1 - c0), ch = side / (r1 - r0);
  const X = (j) => x0 + (j - c0) * cw, Y = (i) => y0 + (i - r0) * ch;
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(cellImage(r1 - r0, c1 - c0, (a, b) => opts.value(r0 + a, c0 + b), lut(opts.scale)), x0, y0, side, side);
  ctx.save();
  ctx.beginPath(); ctx.rect(x0, y0, side, side); ctx.clip();
  if (opts.lines && opts.lines.length) {
    ctx.strokeStyle = SEP; ctx.setLineDash([2, 2]); ctx.lineWidth = 1;
    for (const c of opts.lines) {
      ctx.beginPath(); ctx.moveTo(X(c + 0.5), y0); ctx.lineTo(X(c + 0.5), y0 + side); ctx.stroke();
      ctx.beginPath(); ctx.moveTo(x0, Y(c + 0.5)); ctx.lineTo(x0 + side, Y(c + 0.5)); ctx.stroke();
    }
    ctx.setLineDash([]);
  }
  if (opts.cross) {
    const { i, j } = opts.cross;
    ctx.strokeStyle = HL; ctx.fillStyle = 'rgba(8,145,178,0.16)'; ctx.lineWidth = 1.2;
    if (i != null) { ctx.fillRect(x0, Y(i), side, ch); ctx.strokeRect(x0, Y(i), side, ch); }
    if (j != null) { ctx.fillRect(X(j), y0, cw, side); ctx.strokeRect(X(j), y0, cw, side); }
  }
  if (opts.pair) { ctx.strokeStyle = '#f59e0b'; ctx.lineWidth = 2; ctx.strokeRect(X(opts.pair.j), Y(opts.pair.i), cw, ch); }
  ctx.restore();
  if (labels.length) {
    const tr = tickSet(labels, [r0, r1 - 1], side), tc = tickSet(labels, [c0, c1 - 1], side);
    ctx.save();
    ctx.fillStyle = '#374151';
    ctx.textBaseline = 'middle';
    ctx.textAlign = 'right';
    ctx.font = `${tr.fontPx}px ${MONO}`;
    tr.vals.forEach((v, k) => ctx.fillText(tr.text[k], x0 - 3, Y(v + 0.5)));
    ctx.font = `${tc.fontPx}px ${MONO}`;
    ctx.translate(x0, y0 + side + 3);
    ctx.rotate(-Math.PI / 2);
    tc.vals.forEach((v, k) => ctx.fillText(tc.text[k], 0, (v - c0 + 0.5) * cw));
    ctx.restore();
  }
  return { x0, y0, cw, ch, r0, r1, c0, c1, n, side };
}

/** The cell (i, j) under canvas coordinates (x, y) of a drawMatrix() geometry; null outside. */
export function cellAt(geom, x, y) {
  const i = geom.r0 + Math.floor((y - geom.y0) / geom.ch), j = geom.c0 + Math.floor((x - geom.x0) / geom.cw);
  return i >= geom.r0 && j >= geom.c0 && i < geom.r1 && j < geom.c1 ? { i, j } : null;
}

/**
 * An interactive matrix panel (attention, S, mask, block averages) in ``host``: drawMatrix() on a canvas,
 * a hover readout, click, and zoom by dragging a rectangle (double-click or the reset button: all).
 * handlers: { onHover(cell | null, event), onClick(cell, event), onZoom(range | null, view) }. onZoom is where
 * a caller keeps panels in step, or fetches exact values of the region (a binned overview) and draws them.
 */
export class MatrixView {
  constructor(host, handlers = {}) {
    this.host = host;
    this.handlers = handlers;
    this.range = null;
    this.spec = null;
    this.geom = null;
    if (getComputedStyle(host).position === 'static') host.style.position = 'relative';
    this.canvas = document.createElement('canvas');
    this.canvas.className = 'hs-matrix';
    this.canvas.style.cursor = 'crosshair';
    this.box = document.createElement('div');
    this.box.style.cssText = 'position:absolute;display:none;border:1px dashed #0891b2;background:rgba(8,145,178,0.12);pointer-events:none';
    this.reset = document.createElement('button');
    this.reset.type = 'button';
    this.reset.textContent = 'reset zoom';
    this.reset.className = 'hs-reset';
    this.reset.style.cssText = 'position:absolute;top:4px;right:4px;display:none;font-size:11px';
    this.reset.addEventListener('click', () => this.zoom(null));
    host.append(this.canvas, this.box, this.reset);
    let drag = null;
    const at = (ev) => {
      const r = this.canvas.getBoundingClientRect();
      return [ev.clientX - r.left, ev.clientY - r.top];
    };
    const clampCell = (x, y) => {
      const g = this.geom;
      return cellAt(g, Math.min(Math.max(x, g.x0), g.x0 + g.side - 0.01), Math.min(Math.max(y, g.y0), g.y0 + g.side - 0.01));
    };
    this.canvas.addEventListener('mousedown', (ev) => {
      if (ev.button !== 0 || !this.geom) return;
      const [x, y] = at(ev);
      if (cellAt(this.geom, x, y)) { drag = { x, y, moved: false }; ev.preventDefault(); }
    });
    this.canvas.addEventListener('mousemove', (ev) => {
      if (!this.geom) return;
      const [x, y] = at(ev);
      if (drag && (drag.moved || Math.abs(x - drag.x) + Math.abs(y - drag.y) > 5)) {
        drag.moved = true;
        Object.assign(this.box.style, { display: 'block', left: `${this.canvas.offsetLeft + Math.min(x, drag.x)}px`,
          top: `${this.canvas.offsetTop + Math.min(y, drag.y)}px`, width: `${Math.abs(x - drag.x)}px`, height: `${Math.abs(y - drag.y)}px` });
        return;
      }
      if (this.handlers.onHover) this.handlers.onHover(cellAt(this.geom, x, y), ev);
    });
    this.canvas.addEventListener('mouseup', (ev) => {
      if (!drag) return;
      const d = drag;
      drag = null;
      this.box.style.display = 'none';
      const [x, y] = at(ev);
      if (!d.moved) { const c = cellAt(this.geom, x, y); if (c && this.handlers.onClick) this.handlers.onClick(c, ev); return; }
      const a = clampCell(d.x, d.y), b = clampCell(x, y);
      this.zoom({ r0: Math.min(a.i, b.i), r1: Math.max(a.i, b.i) + 1, c0: Math.min(a.j, b.j), c1: Math.max(a.j, b.j) + 1 });
    });
    this.canvas.addEventListener('mouseleave', (ev) => {
      drag = null;
      this.box.style.display = 'none';
      if (this.handlers.onHover) this.handlers.onHover(null, ev);
    });
    this.canvas.addEventListener('dblclick', () => this.zoom(null));
  }

  /** Draw ``spec`` (drawMatrix's options less range) in the current zoom; a spec of another size resets it. */
  draw(spec) {
    if (this.range && this.spec && this.spec.n !== spec.n) this.range = null;
    this.spec = spec;
    this.geom = drawMatrix(this.canvas, { ...spec, range: this.range });
    this.reset.hidden = false;
    this.reset.style.display = this.range ? 'block' : 'none';
    return this.geom;
  }

  /** Show ``range`` ({r0, r1, c0, c1}, end-exclusive; null: all) without telling onZoom (panels kept in step). */
  setRange(range) {
    this.range = range;
    if (this.spec) this.draw(this.spec);
  }

  /** A user's zoom: show ``range`` and tell onZoom. */
  zoom(range) {
    this.setRange(range);
    if (this.handlers.onZoom) this.handlers.onZoom(range, this);
  }
}

/** Block-averaged down-sampling of an n × n matrix (value(i, j)) to size × size (size ≥ n: unchanged). */
export function thumbnail(n, value, size) {
  const s = Math.min(size, n), out = new Float32Array(s * s), cnt = new Float32Array(s * s);
  for (let i = 0; i < n; i++) {
    const r = Math.floor(i * s / n);
    for (let j = 0; j < n; j++) {
      const k = r * s + Math.floor(j * s / n);
      out[k] += value(i, j); cnt[k] += 1;
    }
  }
  for (let k = 0; k < out.length; k++) out[k] = cnt[k] ? out[k] / cnt[k] : NaN;
  return { size: s, values: out };
}

/** Every ``k``-th of ``n`` labels (from the first) so that labels ``size`` px long, ``step`` px apart, never
 * run together: 1, 2, 4, 5, 10, 20, 25, 50 … */
export function labelStride(n, step, size) {
  for (const k of [1, 2, 4, 5, 10, 20, 25, 50, 100]) if (k * step >= size + 3 || k >= n) return k;
  return n;
}

/** Tile size, gap and step (px) of a grid of L × H tiles within ``width`` × ``height`` px (labels included),
 * tiles of at most ``maxTile`` px. The gap is a seventh of a step (at least 1 px). */
export function gridLayout(L, H, width, height, maxTile = 64) {
  const step = Math.max(3, Math.min(maxTile + Math.max(2, Math.round(maxTile / 6)),
    Math.floor((width - GRID_LEFT - 4) / H), Math.floor((height - GRID_TOP - 4) / L)));
  const gap = step >= 12 ? Math.max(2, Math.round(step / 7)) : 1;
  return { tile: step - gap, gap, step };
}

const GRID_LEFT = 30, GRID_TOP = 18;

/**
 * The model view: every head's thumbnail (layers as rows, heads as columns) on ``canvas``.
 * opts: { L, H, thumb(l, h) → {size, values in [0, 1]}, scale, frame(l, h) → CSS colour or null,
 * selected: {l, h} (0-based), and either tile (px) or width and height (px the grid may take: tiles as large
 * as fit, at most 64 px) }. Layer and head numbers are thinned where they would run together. Returns the
 * geometry for tileAt().
 */
export function drawGrid(canvas, opts) {
  const { L, H } = opts;
  const fit = opts.tile ? { tile: opts.tile, gap: Math.max(5, Math.round(opts.tile / 6)) }
    : gridLayout(L, H, opts.width || 600, opts.height || 600);
  const tile = fit.tile, gap = fit.gap, step = tile + gap;
  const left = GRID_LEFT, top = GRID_TOP;
  const ctx = sizeCanvas(canvas, left + H * step + 4, top + L * step + 4);
  const table = lut(opts.scale);
  ctx.imageSmoothingEnabled = false;
  const font = step >= 22 ? 11 : 10;
  ctx.font = `${font}px ${FONT}`;
  ctx.fillStyle = '#374151';
  ctx.textAlign = 'center';
  ctx.textBaseline = 'middle';
  const everyHead = labelStride(H, step, ctx.measureText(`H${H}`).width);
  for (let h = 0; h < H; h += everyHead) ctx.fillText(`H${h + 1}`, left + h * step + tile / 2, top / 2);
  ctx.textAlign = 'right';
  const everyLayer = labelStride(L, step, font);
  for (let l = 0; l < L; l += everyLayer) ctx.fillText(`L${l + 1}`, left - 6, top + l * step + tile / 2);
  const frameWidth = Math.min(3, Math.max(1, Math.floor(gap / 2)));
  for (let l = 0; l < L; l++) {
    for (let h = 0; h < H; h++) {
      const x = left + h * step, y = top + l * step;
      const th = opts.thumb(l, h);
      ctx.drawImage(cellImage(th.size, th.size, (i, j) => th.values[i * th.size + j], table), x, y, tile, tile);
      const colour = opts.frame ? opts.frame(l, h) : null;
      if (colour) {
        ctx.strokeStyle = colour; ctx.lineWidth = frameWidth;
        ctx.strokeRect(x - frameWidth / 2, y - frameWidth / 2, tile + frameWidth, tile + frameWidth);
      }
    }
  }
  if (opts.selected) {
    const { l, h } = opts.selected;
    ctx.strokeStyle = '#ef4444'; ctx.lineWidth = Math.max(2, frameWidth);
    ctx.strokeRect(left + h * step - gap / 2, top + l * step - gap / 2, tile + gap, tile + gap);
  }
  return { left, top, step, tile, gap, L, H };
}

/** Frame colours of a layer × head grid of a statistic (rows of numbers, null where missing): viridis over
 * the grid's finite range [lo, hi] ([0, 1] when none; the middle colour when all are equal), grey where missing. */
export function statFrames(grid) {
  let lo = Infinity, hi = -Infinity;
  for (const row of grid) for (const v of row) if (v != null && Number.isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  if (!Number.isFinite(lo)) { lo = 0; hi = 1; }
  const frame = (l, h) => {
    const v = grid[l][h];
    return colorAt(VIRIDIS, v == null ? NaN : (hi > lo ? (v - lo) / (hi - lo) : 0.5));
  };
  return { lo, hi, frame };
}

/**
 * The model view with its frames: drawGrid() of the thumbnails on ``canvas`` (``tile``, or the ``width`` and
 * ``height`` it may take) (kind 'attention': Blues, else
 * magma), frames coloured by ``stat`` (a layer × head grid: statFrames(); null: no frames) and their colour
 * bar on ``bar``, labelled "frame: <label>" (hidden without a statistic). Returns drawGrid()'s geometry.
 */
export function drawModelView(canvas, bar, { L, H, tile, width, height, thumb, kind, stat, label, selected }) {
  const frames = stat ? statFrames(stat) : null;
  const geom = drawGrid(canvas, { L, H, tile, width, height, thumb, scale: kind === 'attention' ? BLUES : MAGMA,
    frame: frames ? frames.frame : null, selected });
  bar.hidden = !frames;
  if (frames) drawColorbar(bar, VIRIDIS, frames.lo, frames.hi, `frame: ${label}`);
  return geom;
}

/** Which (layer, head), 0-based, canvas coordinates (x, y) of a drawGrid() geometry fall on: each tile owns the
 * half gaps around it, so every pixel of the grid opens a head (null outside the grid). */
export function tileAt(geom, x, y) {
  const half = (geom.step - geom.tile) / 2;
  const h = Math.floor((x - geom.left + half) / geom.step), l = Math.floor((y - geom.top + half) / geom.step);
  return l < 0 || h < 0 || l >= geom.L || h >= geom.H ? null : { l, h };
}

/** A horizontal colour bar of a scale from lo to hi on ``canvas`` (width × 26 px) with its label. */
export function drawColorbar(canvas, scale, lo, hi, label, width = 220) {
  const ctx = sizeCanvas(canvas, width, 30);
  const grad = ctx.createLinearGradient(0, 0, width, 0);
  for (const [t, c] of scale) grad.addColorStop(t, c);
  ctx.fillStyle = grad;
  ctx.fillRect(0, 0, width, 10);
  ctx.fillStyle = '#374151';
  ctx.font = `10px ${FONT}`;
  ctx.textBaseline = 'top';
  const f = (v) => (Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 10 ? v.toFixed(1) : v.toFixed(3));
  ctx.textAlign = 'left'; ctx.fillText(f(lo), 0, 13);
  ctx.textAlign = 'right'; ctx.fillText(f(hi), width, 13);
  ctx.textAlign = 'center'; ctx.fillText(label, width / 2, 13);
}
