"""The report's inline stylesheet and script: no fonts, images or scripts from the network.

The script only reads the DOM and the page's JSON blob (never builds markup from data): it filters
failed-question cards by error type and search text, expands or collapses them, and highlights a
graph node's edges on hover.
"""

from __future__ import annotations

from memtrace_opt.report.theme import BLAME_RED

__all__ = ["CSS", "JS"]

CSS = """
:root{--fg:#0f172a;--muted:#64748b;--line:#e2e8f0;--bg:#f6f8fb;--card:#fff;--red:%(red)s;--accent:#2563eb}
*{box-sizing:border-box}
body{margin:0;font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,"Noto Sans",sans-serif;
  color:var(--fg);background:var(--bg)}
code,pre,.qid{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace;font-size:12.5px}
code{background:#f1f5f9;border-radius:4px;padding:0 4px}
header.top{background:linear-gradient(135deg,#0f172a,#1e293b);color:#cbd5e1;padding:26px 28px 26px}
header .brand{font-size:12px;letter-spacing:.12em;text-transform:uppercase;color:#94a3b8}
header h1{margin:2px 0 6px;font-size:26px;font-weight:700;color:#fff}
header .meta{font-size:13px;color:#94a3b8}header .meta b{color:#e2e8f0;font-weight:600}
.stats{display:grid;grid-template-columns:repeat(auto-fit,minmax(160px,1fr));gap:12px;margin-top:20px}
.stat{background:rgba(255,255,255,.06);border:1px solid rgba(255,255,255,.10);border-radius:12px;padding:12px 16px}
.stat .k{font-size:11.5px;text-transform:uppercase;letter-spacing:.07em;color:#94a3b8}
.stat .v{font-size:30px;font-weight:700;color:#fff;font-variant-numeric:tabular-nums;line-height:1.2}
.stat.big .v{font-size:36px}.stat .s{font-size:12px;color:#94a3b8}
nav.toc{position:sticky;top:0;z-index:5;background:rgba(246,248,251,.94);backdrop-filter:blur(6px);
  border-bottom:1px solid var(--line);padding:9px 28px;display:flex;gap:20px;font-size:13px}
nav.toc a{color:var(--muted);text-decoration:none}nav.toc a:hover{color:var(--accent)}
main{padding:4px 28px 70px;max-width:1680px}
section{margin-top:30px}h2{font-size:19px;margin:0 0 2px}h3{font-size:14px;margin:0 0 8px;color:#334155}
.lead{color:var(--muted);margin:0 0 14px;max-width:980px}.muted{color:var(--muted)}
.card{background:var(--card);border:1px solid var(--line);border-radius:12px;padding:14px 18px;margin-bottom:12px}
details.card>summary{cursor:pointer;font-weight:600;color:#334155}
.grid2{display:grid;grid-template-columns:repeat(auto-fit,minmax(560px,1fr));gap:12px}
table{border-collapse:collapse;width:100%%;font-variant-numeric:tabular-nums}
th,td{text-align:left;padding:6px 10px;border-bottom:1px solid var(--line);vertical-align:middle}
th{font-size:11.5px;text-transform:uppercase;letter-spacing:.05em;color:var(--muted);font-weight:600}
td.n,th.n{text-align:right}td.best{font-weight:700}td.pos{color:#047857}td.neg{color:#b91c1c}
.ci-bar{vertical-align:-2px;margin-right:8px}td.acc{white-space:nowrap}.ci-bar .track{fill:#eef2f7}
.ci-bar .fill{fill:#93c5fd}.ci-bar .whisker{stroke:#1e3a8a;stroke-width:1.5}
.chip{display:inline-block;padding:1px 9px;border-radius:999px;font-size:11.5px;font-weight:650;color:#fff;
  background:var(--c);white-space:nowrap}
.legend{display:flex;flex-wrap:wrap;gap:6px 18px;font-size:12.5px;color:var(--muted);margin:6px 0 12px}
.legend b{color:var(--fg);font-weight:600}.legend svg{vertical-align:-3px}
.sw{display:inline-block;width:11px;height:11px;border-radius:3px;background:var(--c);margin-right:6px;
  vertical-align:-1px}
.lg-var{fill:#f8fafc;stroke:#94a3b8}.lg-op{fill:#fff;stroke:#475569}
.lg-blamed{fill:#fee2e2;stroke:var(--red);stroke-width:2.5}
.lg-evidence{fill:#f0fdf4;stroke:#16a34a;stroke-width:2}
.lg-failed{fill:#fff;stroke:#f59e0b;stroke-width:2;stroke-dasharray:3 2}
.lg-version{stroke:#a78bfa;stroke-width:2;stroke-dasharray:4 3}
.filters{display:flex;flex-wrap:wrap;align-items:center;gap:8px;margin:4px 0 10px}
.filters button{border:1px solid var(--line);background:#fff;border-radius:999px;padding:3px 11px;font:inherit;
  font-size:12.5px;cursor:pointer;color:var(--fg)}
.filters button[aria-pressed=false]{opacity:.4}
.filters input{border:1px solid var(--line);border-radius:999px;padding:4px 12px;font:inherit;font-size:12.5px;
  min-width:220px}
details.q{background:#fff;border:1px solid var(--line);border-left:5px solid var(--c);border-radius:12px;
  margin:10px 0;box-shadow:0 1px 2px rgba(15,23,42,.04)}
details.q>summary{cursor:pointer;padding:11px 16px;display:flex;flex-wrap:wrap;gap:4px 12px;align-items:baseline;
  list-style:none}
details.q>summary::-webkit-details-marker{display:none}
details.q>summary::before{content:"▸";color:var(--muted);width:10px}details.q[open]>summary::before{content:"▾"}
.qid{color:var(--muted)}.qtext{font-weight:650}
.ans{color:var(--muted);font-size:13px;flex-basis:100%%;padding-left:22px}
.qbody{padding:2px 14px 16px;display:grid;grid-template-columns:minmax(0,3fr) minmax(0,2fr);gap:14px 22px}
.qbody>.graphwrap,.qbody>.caption,.qbody>.lives,.qbody>.note{grid-column:1/-1}
.lives{display:flex;flex-wrap:wrap;gap:10px}
.reason{border-left:4px solid var(--c);background:#f8fafc;border-radius:0 10px 10px 0;padding:10px 14px}
.reason p{margin:6px 0 8px;font-size:14.5px}.reason .rmeta{font-size:12.5px;line-height:1.7}
.reason.none{border-color:#cbd5e1;color:var(--muted)}
.cf{font-weight:600;white-space:nowrap}.cf.yes{color:#047857}.cf.no{color:#b45309}
.cf.na{color:var(--muted);font-weight:400}
.chain{font-size:13px;margin:0 0 8px;padding:6px 10px;border-left:3px solid #b45309;background:#fffbeb}.chain ol{margin:4px 0 0 18px;padding:0}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:3px 14px;margin:0;font-size:13px}
dl.facts dt{color:var(--muted);font-size:11.5px;text-transform:uppercase;letter-spacing:.05em;padding-top:2px}
dl.facts dd{margin:0;overflow-wrap:anywhere}
.graphwrap{overflow-x:auto;border:1px solid var(--line);border-radius:10px;background:#fbfcfe;padding:4px}
svg.slice{display:block;max-width:100%%;height:auto}
svg text{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif}
.slice .col-title{font-size:10.5px;fill:#94a3b8;letter-spacing:.08em;text-transform:uppercase}
.node .shape{fill:#f8fafc;stroke:#cbd5e1;stroke-width:1.2}.node .l1{font-size:11.5px;font-weight:650;fill:#0f172a}
.node .l2{font-size:10.5px;fill:#64748b}
.node.operation .shape{fill:#fff;stroke:#64748b}.node.operation.llm .shape{fill:#f1f5f9;stroke:#334155}
.node.cat-message .shape{fill:#eff6ff;stroke:#93c5fd}.node.cat-memory-unit .shape{fill:#f5f3ff;stroke:#a78bfa}
.node.cat-query .shape{fill:#fefce8;stroke:#eab308}.node.cat-retrieved-context .shape{fill:#ecfdf5;stroke:#6ee7b7}
.node.cat-gold-answer .shape{fill:#f0fdf4;stroke:#22c55e}
.node.wrong .shape{fill:#fef2f2;stroke:#f87171}.node.right .shape{fill:#f0fdf4;stroke:#4ade80}
.node.evidence .shape{stroke:#16a34a;stroke-width:2.4}
.node.failed .shape{stroke:#f59e0b;stroke-width:2;stroke-dasharray:4 3}
.node.deleted .shape{stroke-dasharray:5 4;fill:#f1f5f9}.node .strike{text-decoration:line-through;fill:#64748b}
.node.blamed .shape{stroke:var(--red);stroke-width:3.2}
.node.more .shape{fill:#fff;stroke:#cbd5e1;stroke-dasharray:3 3}
.node.more .l1{fill:#64748b}.blame-tag{font-size:11.5px;font-weight:800}
.ev-tag{font-size:10px;font-weight:700;fill:#16a34a}
.edge{fill:none;stroke:#cbd5e1;stroke-width:1.3}.edge.path{stroke:#475569;stroke-width:1.9}
.edge.blamed{stroke:var(--red);stroke-width:2.3}.edge.version{stroke:#a78bfa;stroke-dasharray:4 3}
.edge.collapsed{stroke-dasharray:2 3}
.slice .hl .shape{stroke:var(--accent)!important;stroke-width:2.6}
.slice path.edge.hl{stroke:var(--accent)!important;stroke-width:2.8}
.slice.dim .node:not(.hl),.slice.dim path.edge:not(.hl){opacity:.35}
.caption{font-size:12px;color:var(--muted);margin:-6px 0 0}
.unit-life{background:#fff;border:1px solid var(--line);border-radius:10px;padding:8px 12px;overflow-x:auto;
  max-width:100%%}
.ul-title{font-size:12.5px;color:#334155;font-weight:600}
.tl-axis{stroke:#cbd5e1;stroke-width:2}.tl-dot{stroke:#fff;stroke-width:2;fill:#94a3b8}
.tl-event.created .tl-dot{fill:#16a34a}.tl-event.updated .tl-dot{fill:#2563eb}.tl-event.deleted .tl-dot{fill:#64748b}
.tl-top{font-size:11px;font-weight:650;fill:#334155}.tl-op{font-size:10.5px;fill:#475569}
.tl-val{font-size:10px;fill:#94a3b8}.tl-gap{font-size:11px;fill:#94a3b8}
.chart .bar-label,.chart .tick,.chart .legend-t,.chart .axis-t{font-size:11.5px;fill:#475569}
.chart .seg-n{font-size:11px;fill:#fff;font-weight:700}
.chart .bar-total{font-size:11.5px;fill:#0f172a;font-weight:650}.chart .grid{stroke:#eef2f7}
.chart .ci{stroke-width:2;opacity:.6}
svg.chart{max-width:100%%;height:auto}
.diff{font-size:12.5px;line-height:1.6;background:#fff;border:1px solid var(--line);border-radius:10px;padding:8px 0;
  margin:10px 0 0;white-space:pre-wrap;overflow-wrap:anywhere}
.dl{display:block;padding:0 14px}.dl.add{background:#ecfdf5;color:#065f46}.dl.del{background:#fef2f2;color:#991b1b}
.dl.hunk{background:#eff6ff;color:#1d4ed8}.dl.meta{color:var(--muted)}
.dl .sign{display:inline-block;width:1.3em;opacity:.7;user-select:none}
ins{background:#a7f3d0;text-decoration:none;border-radius:3px}del{background:#fecaca;border-radius:3px}
.dl-add{background:#ecfdf5;color:#065f46;padding:0 4px;border-radius:3px}
.dl-del{background:#fef2f2;color:#991b1b;padding:0 4px;border-radius:3px}
.plus{color:#047857;font-weight:650}.minus{color:#b91c1c;font-weight:650}
pre.prompt{white-space:pre-wrap;background:#f8fafc;border-radius:8px;padding:10px}
.final-line{font-size:14.5px}details.round-prompts{margin:8px 0 0 6px}
details.round-prompts>summary{cursor:pointer;color:#334155}
h4{margin:10px 0 0;font-size:13px}
.note{color:#92400e;background:#fffbeb;border:1px solid #fde68a;border-radius:8px;padding:6px 10px;font-size:13px}
ul.notes li{color:#92400e}
footer{color:var(--muted);font-size:12px;padding:20px 28px 40px}
@media print{nav.toc{display:none}details.q{break-inside:avoid}}
""" % {"red": BLAME_RED}

JS = """
(function () {
  "use strict";
  var blob = document.getElementById("report-data");
  var data = blob ? JSON.parse(blob.textContent) : {};
  var cards = Array.prototype.slice.call(document.querySelectorAll("details.q"));
  var active = {};
  var buttons = document.querySelectorAll("button[data-filter]");
  buttons.forEach(function (b) { active[b.getAttribute("data-filter")] = true; });
  var search = document.getElementById("q-search");
  var counter = document.getElementById("q-count");
  function apply() {
    var q = search ? search.value.trim().toLowerCase() : "";
    var shown = 0;
    cards.forEach(function (c) {
      var ok = active[c.getAttribute("data-error")] !== false &&
               (!q || (c.getAttribute("data-text") || "").indexOf(q) >= 0);
      c.hidden = !ok;
      if (ok) { shown += 1; }
    });
    if (counter) { counter.textContent = shown + " of " + (data.failed_total || cards.length) + " shown"; }
  }
  buttons.forEach(function (b) {
    b.addEventListener("click", function () {
      var key = b.getAttribute("data-filter");
      active[key] = !active[key];
      b.setAttribute("aria-pressed", active[key] ? "true" : "false");
      apply();
    });
  });
  if (search) { search.addEventListener("input", apply); }
  function setAll(open) { cards.forEach(function (c) { if (!c.hidden) { c.open = open; } }); }
  var ex = document.getElementById("expand-all"), co = document.getElementById("collapse-all");
  if (ex) { ex.addEventListener("click", function () { setAll(true); }); }
  if (co) { co.addEventListener("click", function () { setAll(false); }); }
  function clear(svg) {
    svg.classList.remove("dim");
    svg.querySelectorAll(".hl").forEach(function (el) { el.classList.remove("hl"); });
  }
  document.querySelectorAll("svg.slice").forEach(function (svg) {
    svg.addEventListener("mouseover", function (e) {
      var node = e.target.closest ? e.target.closest("g.node") : null;
      if (!node) { return; }
      clear(svg);
      var id = node.getAttribute("data-id");
      node.classList.add("hl");
      svg.querySelectorAll("path.edge").forEach(function (p) {
        var s = p.getAttribute("data-s"), t = p.getAttribute("data-t");
        if (s === id || t === id) {
          p.classList.add("hl");
          svg.querySelectorAll("g.node").forEach(function (n) {
            var nid = n.getAttribute("data-id");
            if (nid === s || nid === t) { n.classList.add("hl"); }
          });
        }
      });
      svg.classList.add("dim");
    });
    svg.addEventListener("mouseleave", function () { clear(svg); });
  });
  apply();
})();
"""
