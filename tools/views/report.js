// bneck report: draws the sections from the JSON embedded in the page (no network, no library).
(function () {
  "use strict";
  const D = JSON.parse(document.getElementById("bneck-data").textContent);
  const NS = "http://www.w3.org/2000/svg";
  const COLORS = { compute: "#4e79a7", memcpy: "#f28e2b", communication: "#59a14f", host: "#bab0ac" };
  const R = D.replay;
  const el = (tag, attrs, parent, text) => {
    const e = tag.startsWith("svg:") ? document.createElementNS(NS, tag.slice(4)) : document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  };
  const fmt = (ns) => {
    const a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toFixed(3) + " s";
    if (a >= 1e6) return (ns / 1e6).toFixed(3) + " ms";
    if (a >= 1e3) return (ns / 1e3).toFixed(3) + " us";
    return Math.round(ns) + " ns";
  };
  const interval = (b) => (b && b.high_ns ? fmt(b.low_ns) + " .. " + fmt(b.high_ns) : "-");
  const pct = (a, b) => (b ? ((a / b - 1) * 100).toFixed(2) + " %" : "-");
  const section = (id, title) => { const s = el("section", { id: id }, document.body); el("h2", {}, s, title); return s; };
  const table = (parent, head, rows) => {
    const t = el("table", {}, parent), tr = el("tr", {}, t);
    head.forEach((h) => el("th", {}, tr, h));
    rows.forEach((r) => { const x = el("tr", {}, t); r.forEach((c) => el("td", {}, x, String(c))); });
    return t;
  };
  const tip = el("div", { id: "tip" }, document.body);
  const showTip = (ev, text) => { tip.textContent = text; tip.style.display = "block"; tip.style.left = ev.clientX + 14 + "px"; tip.style.top = ev.clientY + 10 + "px"; };
  const hideTip = () => { tip.style.display = "none"; };

  // Header.
  const head = el("header", { id: "summary" }, document.body);
  el("h1", {}, head, "bneck report");
  el("div", { class: "muted" }, head, D.trace + " (" + R.format + "), model " + R.model);
  table(head, ["", "measured", "simulated", "error"], [
    ["GPU span", fmt(R.measured_makespan_ns), fmt(R.makespan_ns), pct(R.makespan_ns, R.measured_makespan_ns)],
    ["GPU busy", fmt(R.measured_overlap.gpu_busy_ns), fmt(R.overlap.gpu_busy_ns), pct(R.overlap.gpu_busy_ns, R.measured_overlap.gpu_busy_ns)],
    ["GPU idle", fmt(R.measured_overlap.gpu_idle_ns), fmt(R.overlap.gpu_idle_ns), ""],
  ]);

  // Advice: the bottleneck and the changes that remove it, ranked by forecast.
  if (D.advice) {
    const A = D.advice, ad = section("advice", "What holds it back, and what to change");
    if (A.scope) el("div", { class: "muted" }, ad, "Advised on " + A.scope);
    if (A.capture) el("p", {}, ad, A.capture);
    if (A.verdict) el("p", {}, ad, "Verdict: " + A.verdict);
    el("p", {}, ad, "Bottleneck: " + A.bottleneck.class + ". " + A.bottleneck.evidence);
    if (A.assumed_hw) el("div", { class: "muted" }, ad, A.assumed_hw);
    if (A.phases.length) table(ad, ["phase", "instances", "span", "GPU busy", "bottleneck", "evidence"],
      A.phases.map((p) => [p.phase, p.instances, fmt(p.span_ns), fmt(p.busy_ns), p.bottleneck, p.evidence]));
    const paths = Object.entries(A.critical_path_by_class).sort((x, y) => y[1] - x[1]);
    table(ad, ["critical path", "time", "share"], paths.map(([c, ns]) => [c, fmt(ns), (100 * ns / Math.max(1, A.critical_path_ns)).toFixed(1) + " %"]));
    if (A.host_note) {
      const hosts = Object.entries(A.host_terms || {}).sort((x, y) => y[1] - x[1]);
      table(ad, ["the host's part, by cause", "time", "share"], hosts.map(([c, ns]) => [c, fmt(ns), (100 * ns / Math.max(1, A.critical_path_ns)).toFixed(1) + " %"]));
      el("p", {}, ad, A.host_note + "; " + A.host_pace);
    }
    const ranked = (title, list) => {
      let rank = 0;
      el("h3", {}, ad, title);
      table(ad, ["#", "change", "baseline", "forecast", "speedup", "80 % interval", "Amdahl", "trade-off", "bneck whatif TRACE ..."],
        (list || []).filter((x) => !x.error).map((x) => [++rank, x.title, fmt(x.baseline_ns), fmt(x.predicted_ns),
          x.speedup.toFixed(2) + "x", interval(x.error_bar), fmt(x.amdahl_ns), x.tradeoff, x.args.join(" ")]));
    };
    ranked("Changes to the program, best first", A.suggestions);
    if ((A.plan || []).length) {
      el("h3", {}, ad, "Following the bottleneck: each change on top of the ones before");
      table(ad, ["#", "change", "baseline", "forecast (together)", "speedup", "80 % interval", "after it", "bneck whatif TRACE ..."],
        A.plan.map((p, i) => [i + 1, (i ? "+ " : "") + p.title, fmt(p.baseline_ns), fmt(p.predicted_ns), p.speedup.toFixed(2) + "x",
          interval(p.error_bar), p.after, p.args.join(" ")]));
    }
    ranked("Hardware, for comparison", A.hardware);
  }

  // Timelines: measured and simulated, one row per stream, zoom (wheel) and pan (drag) together.
  const T = D.timeline;
  const tl = section("timelines", "Timelines: measured and simulated");
  el("div", { class: "muted" }, tl, T.window_ops + " device ops" + (T.cut ? " (the first by start of " + T.device_ops + ")" : "") +
    "; wheel to zoom, drag to pan, hover for an op; red outline: on the critical path");
  const legend = el("div", { class: "legend" }, tl);
  for (const c of ["compute", "memcpy", "communication"]) { const s = el("span", {}, legend); el("span", { class: "sw", style: "background:" + COLORS[c] }, s); s.appendChild(document.createTextNode(c)); }
  let tmax = 1;
  for (const k of ["measured", "simulated"]) for (const r of T[k]) tmax = Math.max(tmax, r[1] + r[2]);
  const W = 1200, LW = 170, RH = 18, H = 24 + RH * Math.max(1, T.lanes.length);
  // SVG coordinates in units of U ns, at most 1e6 of them: renderers clamp large coordinates
  // (Chromium's near 3e7), which squeezed a second-long trace into its first 40 ms.
  const U = Math.max(1, tmax / 1e6);
  const views = [];
  let v0 = 0, v1 = tmax;
  const redraw = () => {
    for (const v of views) {
      v.g.setAttribute("transform", "translate(" + LW + ",0) scale(" + ((W - LW) * U) / (v1 - v0) + ",1) translate(" + -v0 / U + ",0)");
      v.axis.textContent = fmt(v0) + " .. " + fmt(v1) + " (" + fmt(v1 - v0) + " shown)";
    }
  };
  for (const kind of ["measured", "simulated"]) {
    el("div", { class: "tl-title" }, tl, kind === "measured" ? "measured (trace)" : "simulated (bneck)");
    const svg = el("svg:svg", { width: W, height: H, class: "timeline " + kind, "data-kind": kind }, tl);
    T.lanes.forEach((name, i) => {
      el("svg:line", { x1: 0, x2: W, y1: 20 + RH * (i + 1) - 1, y2: 20 + RH * (i + 1) - 1, class: "grid" }, svg);
      el("svg:text", { x: 4, y: 20 + RH * i + 12, class: "tl-label" }, svg, name.length > 26 ? name.slice(0, 25) + "…" : name);
    });
    const clip = el("svg:clipPath", { id: "clip-" + kind }, el("svg:defs", {}, svg));
    el("svg:rect", { x: LW, y: 0, width: W - LW, height: H }, clip);
    const outer = el("svg:g", { "clip-path": "url(#clip-" + kind + ")" }, svg);
    const g = el("svg:g", {}, outer);
    const rows = T[kind];
    for (let k = 0; k < rows.length; k++) {
      const [id, start, dur] = rows[k];
      const [ni, lane, cls, crit, slack] = T.ops[k];
      const r = el("svg:rect", { x: start / U, y: 20 + RH * lane + 2, width: Math.max(dur, (tmax / (W - LW)) * 0.5) / U, height: RH - 5,
        fill: COLORS[cls] || "#999", class: "op " + (kind === "measured" ? "m" : "s") + (crit ? " critical" : ""), "data-id": id }, g);
      const text = T.names[ni] + "\n" + fmt(dur) + (kind === "simulated" ? ", slack " + fmt(slack) + (crit ? ", critical" : "") : "") + " (op " + id + ")";
      r.addEventListener("mousemove", (ev) => showTip(ev, text));
      r.addEventListener("mouseleave", hideTip);
    }
    const axis = el("svg:text", { x: LW, y: 13, class: "axis" }, svg, "");
    views.push({ svg: svg, g: g, axis: axis });
    svg.addEventListener("wheel", (ev) => {
      ev.preventDefault();
      const box = svg.getBoundingClientRect(), fx = Math.min(1, Math.max(0, (ev.clientX - box.left - LW) / (W - LW)));
      const at = v0 + fx * (v1 - v0), f = ev.deltaY > 0 ? 1.25 : 0.8, span = Math.max(100, (v1 - v0) * f);
      v0 = Math.max(0, at - fx * span); v1 = Math.min(tmax, v0 + span); redraw();
    }, { passive: false });
    let drag = null;
    svg.addEventListener("mousedown", (ev) => { drag = { x: ev.clientX, v0: v0, v1: v1 }; });
    window.addEventListener("mouseup", () => { drag = null; });
    svg.addEventListener("mousemove", (ev) => {
      if (!drag) return;
      const d = ((ev.clientX - drag.x) / (W - LW)) * (drag.v1 - drag.v0);
      v0 = Math.max(0, drag.v0 - d); v1 = Math.min(tmax, v0 + (drag.v1 - drag.v0)); redraw();
    });
  }
  redraw();

  // Critical path and its breakdown.
  const cp = section("critical-path", "Critical path");
  const bd = R.critical_path_breakdown_ns || {};
  const total = Object.values(bd).reduce((a, b) => a + b, 0) || 1;
  const bar = el("svg:svg", { width: 900, height: 28, class: "breakdown" }, cp);
  let x = 0;
  Object.entries(bd).forEach(([k, v], i) => {
    const w = (900 * v) / total;
    const r = el("svg:rect", { x: x, y: 2, width: w, height: 24, fill: ["#4e79a7", "#bab0ac", "#e15759", "#f28e2b", "#59a14f", "#76b7b2"][i % 6] }, bar);
    r.addEventListener("mousemove", (ev) => showTip(ev, k + ": " + fmt(v)));
    r.addEventListener("mouseleave", hideTip);
    x += w;
  });
  table(cp, ["class", "time on the path", "share"], Object.entries(bd).map(([k, v]) => [k, fmt(v), ((100 * v) / total).toFixed(1) + " %"]));
  // Repeated ops folded into one line each: count and total time on the path, longest total first.
  const cps = R.critical_path || [], groups = new Map();
  cps.forEach((o) => {
    const k = o.kind + "\u0000" + o.name;
    if (!groups.has(k)) groups.set(k, { name: o.name, kind: o.kind, n: 0, total: 0 });
    const g = groups.get(k);
    g.n += 1;
    g.total += o.end_ns - o.start_ns;
  });
  const gl = [...groups.values()].sort((a, b) => b.total - a.total || (a.name < b.name ? -1 : 1));
  table(cp, ["op on the critical path (" + Math.min(40, gl.length) + " of " + gl.length + " distinct, " + cps.length + " ops)", "kind", "count", "total on the path"],
    gl.slice(0, 40).map((g) => [g.name, g.kind, String(g.n), fmt(g.total)]));

  // Overlap and idle per rank.
  const ov = section("overlap", "Overlap and idle per rank");
  const oc = ["compute_ns", "memcpy_ns", "communication_ns", "exposed_communication_ns", "gpu_busy_ns", "gpu_idle_ns"];
  table(ov, ["rank", "schedule"].concat(oc.map((c) => c.replace("_ns", ""))), (R.ranks || []).flatMap((k) => [
    ["rank " + k.rank, "measured"].concat(oc.map((c) => fmt(k.measured_overlap[c] || 0))),
    ["", "simulated"].concat(oc.map((c) => fmt(k.overlap[c] || 0))),
  ]));

  // Ranges measured vs simulated.
  const rg = section("ranges", "Ranges: measured vs simulated");
  if (!(R.ranges || []).length) el("div", { class: "muted" }, rg, "no --range given (or none matched)");
  else table(rg, ["range", "rank", "measured", "simulated", "error"], R.ranges.map((r) => [r.name, r.rank, fmt(r.measured_span_ns), fmt(r.simulated_span_ns), pct(r.simulated_span_ns, r.measured_span_ns)]));

  // Roofline (log-log): each kernel name's FLOPs over bytes against its achieved rate.
  const RF = D.roofline;
  const rf = section("roofline", "Roofline of the trace's kernels (" + RF.gpu + ")");
  const PW = 640, PH = 380, PL = 60, PB = 36;
  const svg = el("svg:svg", { width: PW, height: PH, class: "roofline" }, rf);
  const xs = [1e-2, 1e4], ys = [1e9, Math.max(RF.peak_tensor, RF.peak_fp32, 1e12) * 2];
  const X = (v) => PL + ((Math.log10(v) - Math.log10(xs[0])) / (Math.log10(xs[1]) - Math.log10(xs[0]))) * (PW - PL - 10);
  const Y = (v) => PH - PB - ((Math.log10(v) - Math.log10(ys[0])) / (Math.log10(ys[1]) - Math.log10(ys[0]))) * (PH - PB - 10);
  for (let e = -2; e <= 4; e++) { el("svg:line", { x1: X(10 ** e), x2: X(10 ** e), y1: 10, y2: PH - PB, class: "grid" }, svg); el("svg:text", { x: X(10 ** e) - 8, y: PH - PB + 14, class: "axis" }, svg, "1e" + e); }
  for (let e = 9; e <= Math.log10(ys[1]); e++) { el("svg:line", { x1: PL, x2: PW - 10, y1: Y(10 ** e), y2: Y(10 ** e), class: "grid" }, svg); el("svg:text", { x: 4, y: Y(10 ** e) + 3, class: "axis" }, svg, "1e" + e); }
  el("svg:text", { x: PL + 160, y: PH - 6, class: "axis" }, svg, "arithmetic intensity (FLOP/byte)");
  el("svg:text", { x: 4, y: 12, class: "axis" }, svg, "FLOP/s");
  const roof = (peak, color) => {
    const ridge = peak / RF.bandwidth, pts = [[xs[0], xs[0] * RF.bandwidth], [ridge, peak], [xs[1], peak]];
    el("svg:polyline", { points: pts.map((p) => X(p[0]) + "," + Y(Math.max(p[1], ys[0]))).join(" "), fill: "none", stroke: color, "stroke-width": 2 }, svg);
  };
  if (RF.bandwidth > 0) { if (RF.peak_tensor > 0) roof(RF.peak_tensor, "#9c755f"); if (RF.peak_fp32 > 0) roof(RF.peak_fp32, "#bab0ac"); }
  const tt = RF.kernels.reduce((a, k) => a + k[3], 0) || 1;
  for (const [name, ai, rate, t] of RF.kernels) {
    if (!(ai > 0 && rate > 0)) continue;
    const c = el("svg:circle", { cx: X(Math.min(Math.max(ai, xs[0]), xs[1])), cy: Y(Math.min(Math.max(rate, ys[0]), ys[1])), r: 3 + 9 * Math.sqrt(t / tt), fill: "#4e79a7", "fill-opacity": 0.6, class: "kernel" }, svg);
    c.addEventListener("mousemove", (ev) => showTip(ev, name + "\n" + ai.toFixed(2) + " FLOP/B, " + (rate / 1e12).toFixed(3) + " TFLOP/s, " + fmt(t) + " in all"));
    c.addEventListener("mouseleave", hideTip);
  }
  el("div", { class: "muted" }, rf, RF.kernels.length + " kernel names (circle area: their time); roofs: tensor-core peak and FP32, HBM bandwidth");

  // What-if: baseline vs forecast vs Amdahl.
  if (D.whatif) {
    const W2 = D.whatif, wi = section("whatif", "What-if: " + (W2.transforms || []).join("; "));
    table(wi, ["", "measured", "baseline (replay)", "forecast", "80 % interval", "Amdahl"], [["mean over ranges", fmt(W2.measured_ns), fmt(W2.baseline_ns), fmt(W2.predicted_ns) + " (" + pct(W2.predicted_ns, W2.baseline_ns) + ")", interval(W2.error_bar), W2.amdahl ? fmt(W2.amdahl.predicted_ns) : "-"]]);
    if (W2.error_bar && W2.error_bar.basis) table(wi, ["the interval's sources, the largest first"], W2.error_bar.basis.map((b) => [b]));
    if ((W2.ranges || []).length) table(wi, ["range", "baseline", "forecast", "change", "80 % interval", "Amdahl"], W2.ranges.map((r) => [r.name, fmt(r.baseline_ns), fmt(r.predicted_ns), pct(r.predicted_ns, r.baseline_ns), interval(r.error_bar), r.amdahl ? fmt(r.amdahl.predicted_ns) : "-"]));
    table(wi, ["moved onto the critical path", "moved off it"], [[(W2.moved_onto_critical_path || []).slice(0, 12).join(", ") || "(none)", (W2.moved_off_critical_path || []).slice(0, 12).join(", ") || "(none)"]]);
  }
  document.title = "bneck report: ok";
  document.body.setAttribute("data-ready", "1");
})();
