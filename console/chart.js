// The usage chart: one stacked bar a day, drawn as one SVG path a series
// (5 paths however many days), with the day's numbers on hover or on the
// arrow keys. It is drawn at the width it is shown at, one unit a pixel,
// so that its labels stay 12 px on a phone, and again when that changes.
// The time it took is kept in the chart's data-draw-ms.
import { num } from './dom.js';

export const series = [
  { name: 'allowed', label: 'Allowed' },
  { name: 'rateLimited', label: 'Rate limited' },
  { name: 'quotaExceeded', label: 'Over quota' },
  { name: 'banned', label: 'Banned' },
  { name: 'forbidden', label: 'Forbidden' },
];

const svgNS = 'http://www.w3.org/2000/svg';
const left = 48; // room for the axis figures
const bottom = 20;
const above = 12; // room for the top figure

function svg(tag, attrs) {
  const e = document.createElementNS(svgNS, tag);
  for (const [k, v] of Object.entries(attrs)) {
    e.setAttribute(k, String(v));
  }
  return e;
}

// drawUsage draws rows (oldest first) into box; readout says a day's
// numbers.
export function drawUsage(box, rows, readout) {
  const start = performance.now();
  const width = Math.max(240, Math.round(box.clientWidth) || 800);
  const height = Math.round(Math.min(360, Math.max(240, width * 0.3)));
  const totals = rows.map((r) => series.reduce((n, s) => n + r[s.name], 0));
  const top = Math.max(1, ...totals);
  const plotW = width - left;
  const plotH = height - bottom - above;
  const step = plotW / rows.length;
  const barW = Math.max(step * 0.8, 0.5);
  const chart = svg('svg', { viewBox: `0 0 ${width} ${height}`, role: 'img', tabindex: 0, class: 'usage-chart',
    'aria-label': `Requests a day over ${rows.length} days, at most ${top} in a day; the table below has every figure` });
  chart.append(svg('line', { x1: left, y1: above + plotH, x2: width, y2: above + plotH, class: 'axis' }));
  for (const f of [0, 0.5, 1]) {
    const y = above + plotH - f * plotH;
    const label = svg('text', { x: left - 6, y: y + 4, class: 'tick', 'text-anchor': 'end' });
    label.textContent = num(Math.round(f * top));
    chart.append(label, svg('line', { x1: left, y1: y, x2: width, y2: y, class: 'grid' }));
  }
  const base = new Float64Array(rows.length);
  for (const s of series) {
    let d = '';
    rows.forEach((r, i) => {
      const v = r[s.name];
      if (v > 0) {
        const hgt = (v / top) * plotH;
        const y = above + plotH - base[i] - hgt;
        d += `M${(left + i * step).toFixed(2)} ${y.toFixed(2)}h${barW.toFixed(2)}v${hgt.toFixed(2)}h${(-barW).toFixed(2)}z`;
        base[i] += hgt;
      }
    });
    chart.append(svg('path', { d: d || 'M0 0', class: 'bar ' + s.name }));
  }
  const first = svg('text', { x: left, y: height - 4, class: 'tick' });
  first.textContent = rows.length ? rows[0].day : '';
  const last = svg('text', { x: width, y: height - 4, class: 'tick', 'text-anchor': 'end' });
  last.textContent = rows.length ? rows[rows.length - 1].day : '';
  const mark = svg('rect', { x: 0, y: above, width: Math.max(step, 1), height: plotH, class: 'mark', visibility: 'hidden' });
  chart.append(first, last, mark);

  let at = rows.length - 1;
  const show = (i) => {
    at = Math.min(rows.length - 1, Math.max(0, i));
    const r = rows[at];
    mark.setAttribute('x', String(left + at * step));
    mark.setAttribute('visibility', 'visible');
    readout.textContent = `${r.day}: ` + series.map((s) => `${s.label.toLowerCase()} ${num(r[s.name])}`).join(', ') + `; ${num(totals[at])} in all`;
  };
  chart.addEventListener('pointermove', (e) => {
    const box = chart.getBoundingClientRect();
    const x = ((e.clientX - box.left) / box.width) * width;
    show(Math.floor((x - left) / step));
  });
  chart.addEventListener('keydown', (e) => {
    const moves = { ArrowLeft: -1, ArrowRight: 1, Home: -rows.length, End: rows.length };
    if (e.key in moves) {
      e.preventDefault();
      show(at + moves[e.key]);
    }
  });
  chart.addEventListener('focus', () => show(at));
  box.replaceChildren(chart);
  chart.getBoundingClientRect(); // the layout too, in the time
  chart.dataset.drawMs = (performance.now() - start).toFixed(2);
  const resized = new ResizeObserver(() => {
    if (Math.abs(box.clientWidth - width) >= 1 && box.clientWidth >= 240 && box.isConnected) {
      resized.disconnect();
      drawUsage(box, rows, readout);
    }
  });
  resized.observe(box);
}
