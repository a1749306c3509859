"""The report page's inline style and chart script: no CDN, no server, works from file://.

The charts are drawn client-side as SVG from JSON specs embedded in the page
(``<script type="application/json">``), so one chart can switch between
documents, bytes and tokens without a second copy of the markup. Two chart
kinds cover every section: ``hbar`` (horizontal bars: grouped, stacked, or
stacked to 100%) and ``columns`` (vertical histogram bars, stacked series, with
threshold marks; ``edge_labels`` puts each label at its bin's left edge, for bins
named by their lower bound). Tables under each chart are plain HTML written by Python, so
the numbers stay readable even with scripts disabled.
"""

CSS = """
:root { --fg:#1d2330; --muted:#5b6474; --line:#d9dde5; --bg:#fff; --panel:#f6f7f9; --accent:#2f6fde; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg);
       background: var(--bg); margin: 0; }
header { padding: 18px 28px; border-bottom: 1px solid var(--line); background: var(--panel); }
header h1 { margin: 0 0 4px; font-size: 20px; }
header p { margin: 0; color: var(--muted); }
nav { padding: 8px 28px; border-bottom: 1px solid var(--line); font-size: 13px; }
nav a { margin-right: 14px; color: var(--accent); text-decoration: none; }
main { padding: 8px 28px 40px; max-width: 1200px; }
section { margin: 26px 0; }
h2 { font-size: 17px; margin: 0 0 4px; }
h3 { font-size: 14px; margin: 16px 0 4px; }
p.note { color: var(--muted); margin: 2px 0 10px; font-size: 13px; }
.chart { margin: 6px 0 10px; }
.chart svg { display: block; max-width: 100%; height: auto; }
.chart svg text { font-size: 11px; fill: var(--fg); }
.chart .axis { stroke: var(--line); }
.toggles { margin: 4px 0; }
.toggles button { font: inherit; font-size: 12px; padding: 2px 10px; margin-right: 4px; border: 1px solid var(--line);
                  background: var(--bg); border-radius: 3px; cursor: pointer; }
.toggles button.on { background: var(--accent); color: #fff; border-color: var(--accent); }
.legend { font-size: 12px; color: var(--muted); margin: 2px 0 4px; }
.legend span { display: inline-block; margin-right: 12px; }
.legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px; vertical-align: -1px; }
table { border-collapse: collapse; font-size: 12.5px; margin: 4px 0 8px; }
th, td { padding: 3px 9px; border-bottom: 1px solid var(--line); text-align: right; white-space: nowrap; }
th:first-child, td:first-child, td.text, th.text { text-align: left; }
th { background: var(--panel); font-weight: 600; }
details summary { cursor: pointer; color: var(--accent); font-size: 13px; }
.warn { background: #fff6e0; border-left: 3px solid #e0a100; padding: 6px 10px; margin: 6px 0; font-size: 13px; }
.empty { color: var(--muted); font-style: italic; }
.pos { color: #b3261e; } .neg { color: #1b7f3b; }
"""

# First script in <head>: any later script error is recorded on <body> (read by tests, shown to users).
ERROR_TRAP = """
window.__reportErrors = [];
window.addEventListener('error', function (e) {
  window.__reportErrors.push(String(e.message || e));
  document.documentElement.setAttribute('data-errors', window.__reportErrors.join(' | '));
});
"""

CHARTS_JS = r"""
(function () {
  'use strict';
  var NS = 'http://www.w3.org/2000/svg';
  var PALETTE = ['#2f6fde', '#e8743b', '#19a979', '#945ecf', '#ed4a7b', '#13a4b4', '#bf9b00', '#525df4',
                 '#bf399e', '#6c8893', '#ee6868', '#2a8f5e'];
  var OTHER = '#b8bec9';
  function color(name, i) { return name === 'other' ? OTHER : PALETTE[i % PALETTE.length]; }
  function el(tag, attrs, parent) {
    var n = document.createElementNS(NS, tag);
    for (var k in attrs) { n.setAttribute(k, attrs[k]); }
    if (parent) { parent.appendChild(n); }
    return n;
  }
  function text(parent, x, y, s, anchor) {
    var t = el('text', {x: x, y: y, 'text-anchor': anchor || 'start'}, parent);
    t.textContent = s;
    return t;
  }
  function fmt(v, kind) {
    if (v === null || v === undefined || isNaN(v)) { return '-'; }
    if (kind === 'pct') { return (100 * v).toFixed(v < 0.001 && v > 0 ? 3 : 1) + '%'; }
    if (kind === 'bytes') {
      var u = ['B', 'KB', 'MB', 'GB', 'TB'], i = 0;
      while (Math.abs(v) >= 1000 && i < u.length - 1) { v /= 1000; i++; }
      return (i ? v.toFixed(1) : v) + ' ' + u[i];
    }
    var a = Math.abs(v);
    if (a >= 1e9) { return (v / 1e9).toFixed(2) + 'G'; }
    if (a >= 1e6) { return (v / 1e6).toFixed(2) + 'M'; }
    if (a >= 1e4) { return (v / 1e3).toFixed(1) + 'k'; }
    return String(Math.round(v * 100) / 100);
  }
  function legend(box, series) {
    if (series.length < 2) { return; }
    var d = document.createElement('div');
    d.className = 'legend';
    series.forEach(function (s, i) {
      var sp = document.createElement('span'), sw = document.createElement('i');
      sw.style.background = color(s.name, i);
      sp.appendChild(sw);
      sp.appendChild(document.createTextNode(s.name));
      d.appendChild(sp);
    });
    box.appendChild(d);
  }
  function hbar(box, spec, data) {
    var cats = spec.categories, series = data.series, stacked = spec.stacked || spec.percent;
    var rowH = stacked ? 22 : Math.max(14, 8 * series.length + 6), labelW = spec.label_width || 170;
    var W = 900, plotW = W - labelW - 90, H = cats.length * (rowH + 6) + 24;
    var svg = el('svg', {viewBox: '0 0 ' + W + ' ' + H, width: W, height: H, 'class': 'chart-svg', role: 'img'});
    var totals = cats.map(function (_, c) {
      return series.reduce(function (a, s) { return a + (s.values[c] || 0); }, 0);
    });
    var max = spec.percent ? 1 : stacked ? Math.max.apply(null, totals.concat([0])) :
      Math.max.apply(null, series.map(function (s) { return Math.max.apply(null, s.values.concat([0])); }));
    if (!(max > 0)) { max = 1; }
    el('line', {x1: labelW, x2: labelW, y1: 0, y2: H - 18, 'class': 'axis'}, svg);
    cats.forEach(function (cat, c) {
      var y = c * (rowH + 6) + 4, x = labelW;
      text(svg, labelW - 6, y + rowH / 2 + 4, cat, 'end');
      series.forEach(function (s, i) {
        var v = s.values[c] || 0, share = spec.percent ? (totals[c] ? v / totals[c] : 0) : v / max;
        var w = Math.max(0, share * plotW), h = stacked ? rowH : (rowH - 4) / series.length;
        var yy = stacked ? y : y + 2 + i * h;
        var r = el('rect', {x: x, y: yy, width: w, height: Math.max(1, h - (stacked ? 0 : 1)), fill: color(s.name, i)}, svg);
        var t = el('title', {}, r);
        t.textContent = cat + ' / ' + s.name + ': ' + fmt(v, data.format) +
          (spec.percent ? ' (' + fmt(share, 'pct') + ')' : '');
        if (stacked) { x += w; } else if (series.length === 1) { text(svg, x + w + 4, yy + h / 2 + 4, fmt(v, data.format)); }
      });
      if (stacked && !spec.percent) { text(svg, x + 4, y + rowH / 2 + 4, fmt(totals[c], data.format)); }
    });
    var axis = spec.percent ? '100%' : fmt(max, data.format);
    text(svg, labelW + plotW, H - 4, axis, 'end');
    text(svg, labelW, H - 4, '0');
    return svg;
  }
  function columns(box, spec, data) {
    var cats = spec.categories, series = data.series, n = cats.length;
    var W = 900, H = 240, left = 56, bottom = 44, plotW = W - left - 12, plotH = H - bottom - 14;
    var svg = el('svg', {viewBox: '0 0 ' + W + ' ' + H, width: W, height: H, 'class': 'chart-svg', role: 'img'});
    var totals = cats.map(function (_, c) { return series.reduce(function (a, s) { return a + (s.values[c] || 0); }, 0); });
    var max = Math.max.apply(null, totals.concat([0]));
    if (!(max > 0)) { max = 1; }
    var log = !!spec.log_y, scale = function (v) { return log ? Math.log10(1 + v) / Math.log10(1 + max) : v / max; };
    var bw = plotW / n;
    el('line', {x1: left, x2: left + plotW, y1: 14 + plotH, y2: 14 + plotH, 'class': 'axis'}, svg);
    cats.forEach(function (cat, c) {
      var y0 = 14 + plotH, acc = 0;
      series.forEach(function (s, i) {
        var v = s.values[c] || 0;
        if (!v) { return; }
        var top = scale(acc + v) * plotH, bot = scale(acc) * plotH;
        var r = el('rect', {x: left + c * bw + 1, y: y0 - top, width: Math.max(1, bw - 2), height: Math.max(1, top - bot),
                            fill: color(s.name, i)}, svg);
        el('title', {}, r).textContent = cat + ' / ' + s.name + ': ' + fmt(v, data.format);
        acc += v;
      });
      var every = Math.ceil(n / 12);
      if (c % every === 0) { text(svg, left + c * bw + (spec.edge_labels ? 0 : bw / 2), H - bottom + 14, cat, 'middle'); }
    });
    (spec.marks || []).forEach(function (m) {
      var x = left + m.at * bw;
      el('line', {x1: x, x2: x, y1: 8, y2: 14 + plotH, stroke: '#b3261e', 'stroke-width': 2, 'stroke-dasharray': '5 3',
                  'class': 'mark'}, svg);
      var nearEnd = x > left + plotW * 0.85;
      text(svg, nearEnd ? x - 4 : x + 4, 12, m.label, nearEnd ? 'end' : 'start');
    });
    text(svg, left - 6, 18, fmt(max, data.format), 'end');
    text(svg, left - 6, 14 + plotH, '0', 'end');
    if (spec.x_label) { text(svg, left + plotW / 2, H - 8, spec.x_label, 'middle'); }
    if (log) { text(svg, left - 6, 30, '(log)', 'end'); }
    return svg;
  }
  var KINDS = {hbar: hbar, columns: columns};
  function draw(box, spec, metric) {
    while (box.lastChild && box.lastChild.className !== 'toggles') { box.removeChild(box.lastChild); }
    var data = spec.metrics[metric];
    legend(box, data.series);
    box.appendChild(KINDS[spec.kind](box, spec, data));
  }
  function render(box) {
    var spec = JSON.parse(document.getElementById(box.getAttribute('data-spec')).textContent);
    var names = Object.keys(spec.metrics);
    if (names.length > 1) {
      var bar = document.createElement('div');
      bar.className = 'toggles';
      names.forEach(function (name, i) {
        var b = document.createElement('button');
        b.type = 'button';
        b.textContent = name;
        b.className = i ? '' : 'on';
        b.addEventListener('click', function () {
          Array.prototype.forEach.call(bar.children, function (x) { x.className = ''; });
          b.className = 'on';
          draw(box, spec, name);
        });
        bar.appendChild(b);
      });
      box.appendChild(bar);
    }
    draw(box, spec, names[0]);
  }
  var boxes = document.querySelectorAll('div.chart[data-spec]');
  var drawn = 0;
  Array.prototype.forEach.call(boxes, function (box) { render(box); drawn++; });
  document.documentElement.setAttribute('data-charts-drawn', String(drawn));
})();
"""
