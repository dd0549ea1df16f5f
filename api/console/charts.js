// Shale's console: SVG line charts and what they draw from /metrics (Prometheus text,
// histogram quantiles between two samples). Loaded first.
'use strict';

// ---------- charts ----------

const COLORS = ['#2563eb', '#d97706', '#059669', '#dc2626', '#7c3aed', '#0891b2'];

// An SVG line chart of fixed size: `draw(series)` with series [{ name, values }].
function lineChart({ id, unit }) {
  const width = 640, height = 160, pad = 36;
  const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.setAttribute('class', 'chart');
  svg.setAttribute('id', id);
  svg.setAttribute('role', 'img');
  const legend = el('p', { class: 'legend', id: `${id}-legend` });
  const draw = (series) => {
    const all = series.flatMap((s) => s.values).filter((v) => Number.isFinite(v));
    const top = Math.max(0, ...all);
    const max = top > 0 ? top : 1;
    const parts = [`<line x1="${pad}" y1="${height - 18}" x2="${width}" y2="${height - 18}" class="axis"/>`,
      `<text x="0" y="12" class="tick">${fmtNumber(max)}</text>`, `<text x="0" y="${height - 20}" class="tick">0</text>`];
    series.forEach((s, i) => {
      const points = s.values.map((v, j) => {
        const x = pad + (width - pad) * (j + CHART_POINTS - s.values.length) / (CHART_POINTS - 1);
        const y = (height - 18) - ((height - 30) * (Number.isFinite(v) ? v : 0)) / max;
        return `${x.toFixed(1)},${y.toFixed(1)}`;
      }).join(' ');
      parts.push(`<polyline fill="none" stroke="${COLORS[i % COLORS.length]}" stroke-width="2" points="${points}" data-series="${escapeAttr(s.name)}"/>`);
    });
    svg.innerHTML = parts.join('');
    svg.setAttribute('aria-label', `${unit}: ${series.map((s) => `${s.name} ${fmtNumber(s.values[s.values.length - 1])}`).join(', ')}`);
    legend.replaceChildren(...series.map((s, i) => el('span', {},
      el('i', { style: `background:${COLORS[i % COLORS.length]}` }), `${s.name}: `,
      el('b', { class: 'num' }, fmtNumber(s.values[s.values.length - 1])), ` ${unit}`)));
  };
  draw([]);
  return { node: el('figure', {}, svg, legend), draw };
}

function escapeAttr(text) {
  return String(text).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]));
}

// ---------- /metrics ----------

// Prometheus text as a map from `name{labels}` to value.
function parseMetrics(text) {
  const samples = new Map();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const space = line.lastIndexOf(' ');
    samples.set(line.slice(0, space), Number(line.slice(space + 1)));
  }
  return samples;
}

function sumOf(samples, name) {
  let total = 0, found = false;
  for (const [key, value] of samples) {
    if (key === name || key.startsWith(`${name}{`)) { total += value; found = true; }
  }
  return found ? total : undefined;
}

// The `q` quantile (seconds) of a histogram's observations between two samples.
function quantileBetween(before, after, name, q) {
  const buckets = [];
  for (const [key, value] of after) {
    const m = key.match(new RegExp(`^${name}_bucket\\{(?:.*,)?le="([^"]+)"\\}$`));
    if (m) buckets.push([m[1] === '+Inf' ? Infinity : Number(m[1]), value - (before.get(key) || 0)]);
  }
  buckets.sort((a, b) => a[0] - b[0]);
  const total = buckets.length ? buckets[buckets.length - 1][1] : 0;
  if (total <= 0) return undefined;
  const rank = q * total;
  let lower = 0, below = 0;
  for (const [bound, count] of buckets) {
    if (count >= rank) {
      if (!Number.isFinite(bound)) return lower;
      const within = count - below;
      return lower + (bound - lower) * (within > 0 ? (rank - below) / within : 1);
    }
    lower = bound; below = count;
  }
  return lower;
}
