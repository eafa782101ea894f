#include "models/whatif/run.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "models/retarget.hpp"
#include "models/whatif/error_bar.hpp"
#include "models/sharing.hpp"
#include "sim/base/error.hpp"

namespace bneck {

HwSpec pick_source(const Trace& t, const std::string& override_spec) {
  try {
    return source_spec(t, override_spec);
  } catch (const InputError&) {
    if (!t.measured && override_spec.empty()) return load_hw("hypothetical-120tf-2tbs");  // hand-written workloads
    throw;
  }
}

namespace {
std::vector<std::string> cp_names(const Graph& g, const std::vector<OpId>& path) {
  std::vector<std::string> out;
  for (OpId n : path)
    if (g.is_device(n)) out.push_back(g.name(n));
  return out;
}

// The baseline's figure (the ranges' center, repeats_center, or the GPU span) for a case.
TimeNs baseline_figure(const Trace& t, const WhatIfCase& c, const WhatIfOptions& opt) {
  const SimResult r = simulate(*c.graph, VectorCostModel(c.durations, "baseline"));
  if (!opt.range_regex) return device_span(*c.graph, sim_schedule(r)).length();
  const std::optional<TimeNs> center = simulated_center(range_spans(*c.graph, r, range_regex(*opt.range_regex)));
  if (!center) throw InputError(t.source, "--range '" + *opt.range_regex + "' matches no range with device ops");
  return *center;
}

// --unprofiled-time: the factor of the measured per-event costs whose removal brings the baseline
// to the measured unprofiled step (bisection over 0 .. 8; the host cannot shrink below its calls).
Transform scaled_unprofile(const Trace& t, const WhatIfEngine& engine, const WhatIfOptions& opt, std::string& note) {
  // A baseline the measured costs already bring within 1 % of the time (the GPU bounds it) says
  // nothing more: the measured costs stay; one that stays above it takes larger costs, one below
  // smaller.
  auto at = [&](double f) { return baseline_figure(t, engine.apply({parse_transform("unprofile", fmt_num("%.6g", f))}), opt); };
  const double target = static_cast<double>(opt.unprofiled_time), one = static_cast<double>(at(1));
  double lo = 1, hi = 1;
  if (one > target * 1.01)
    hi = 8;
  else if (one < target * 0.99)
    lo = 0;
  if (static_cast<double>(at(hi)) > target) lo = hi;
  if (static_cast<double>(at(lo)) <= target) hi = lo;
  for (int k = 0; k < 14 && hi - lo > 1e-3; ++k) {
    const double mid = (lo + hi) / 2;
    (static_cast<double>(at(mid)) > target ? lo : hi) = mid;
  }
  note = "scaled to the measured unprofiled time " + format_duration(opt.unprofiled_time) + ": the measured per-event costs x " +
         fmt_num("%.3g", hi);
  return parse_transform("unprofile", fmt_num("%.6g", hi));
}
}  // namespace

// The profiler's host cost comes out of the baseline and the forecast alike (--unprofile, given
// or by default), so that a faster GPU does not expose the profiler instead of the program: the
// step (null if none applies), the user's transforms after it in `transforms`, the profiler's name.
Transform unprofile_step(const Trace& t, const WhatIfOptions& opt, std::vector<Transform>& transforms, std::string& name) {
  Transform unprofile;
  for (const Transform& tr : opt.transforms)
    if (tr->text.rfind("--unprofile", 0) == 0)
      unprofile = tr;
    else
      transforms.push_back(tr);
  const ProfilerSetting prof = profiler_setting(t);
  const bool costs = prof.costs();
  if (!unprofile && opt.unprofile && costs) unprofile = parse_transform("unprofile", "auto");
  if (!unprofile || unprofile->text == "--unprofile off" || !costs) return nullptr;
  name = prof.name;
  transforms.insert(transforms.begin(), unprofile);
  return unprofile;
}

// A trace of a GPU no preset names (an AMD GPU, a device-less export): the what-ifs that keep or
// rescale measured times need no hardware model and run on a placeholder spec, named for the
// device, with sharing off (it needs the GPU's rates); one that prices work on the GPU's rates
// stops with a line naming it and --source-hw.
HwSpec unidentified_source(const Trace& t, const WhatIfOptions& opt, std::string& note) {
  try {
    return pick_source(t, opt.source_hw);
  } catch (const InputError& e) {
    if (!opt.source_hw.empty()) throw;
    for (const Transform& tr : opt.transforms)
      if (tr->needs_gpu_rates()) throw InputError(std::string(e.what()) + " (" + tr->text + " prices work on the GPU's rates)");
  }
  const std::string device = named_device(t);
  HwSpec s = load_hw("hypothetical-120tf-2tbs");
  s.name = device.empty() ? "an unidentified GPU" : "'" + device + "' (no preset)";
  s.description = "placeholder: measured times only";
  s.chain.clear();
  note = "the trace does not say which GPU ran it" + (device.empty() ? std::string() : " (device '" + device + "': no preset)") +
         ": measured times kept, no hardware model, sharing off; --source-hw SPEC for what-ifs on the GPU's rates";
  return s;
}

namespace {

// The coefficients of variation of the measured and of the predicted spans of the largest group of
// ranges that repeat (names equal but for their digits: step0, step1, ...), those whose measured
// span is within 1.3x of its median (repeats_center). The predicted ones differ where the change
// moves a step onto the host: the traced steps' host paces, hidden under a GPU-bound measured span,
// set the forecast of each.
std::pair<double, double> repeats_spread(const std::vector<WhatIfRange>& ranges) {
  std::map<std::string, std::vector<const WhatIfRange*>> groups;
  for (const WhatIfRange& r : ranges) {
    std::string key;
    for (char ch : r.name)
      if (!std::isdigit(static_cast<unsigned char>(ch))) key += ch;
    groups[key].push_back(&r);
  }
  const std::vector<const WhatIfRange*>* best = nullptr;
  for (const auto& [k, v] : groups)
    if (!best || v.size() > best->size()) best = &v;
  if (!best || best->size() < 2) return {0, 0};
  std::vector<double> spans;
  for (const WhatIfRange* r : *best) spans.push_back(static_cast<double>(r->measured_span_ns));
  const double m = median(spans);
  auto cv = [&](TimeNs WhatIfRange::*field) {
    double sum = 0, sq = 0, n = 0;
    for (const WhatIfRange* r : *best)
      if (near_median(static_cast<double>(r->measured_span_ns), m)) {
        const double x = static_cast<double>(r->*field);
        sum += x, sq += x * x, ++n;
      }
    if (n < 2 || sum <= 0) return 0.0;
    const double mean = sum / n;
    return std::sqrt(std::max(0.0, (sq - n * mean * mean) / (n - 1))) / mean;
  };
  return {cv(&WhatIfRange::measured_span_ns), cv(&WhatIfRange::predicted_ns)};
}

// The forecast's interval and its ranges' (error_bar.hpp).
void attach_error_bars(WhatIfReport& rep, const std::vector<Transform>& transforms, const WhatIfCase& pred, std::vector<double> carry,
                       std::vector<double> combined_share) {
  ErrorContext ec;
  ec.carry_ratio = std::move(carry);
  ec.combined_share = std::move(combined_share);
  const Overlap& o = rep.predicted_overlap;  // the run's, or the ranges' mean
  ec.gpu_busy_after = o.window_ns > 0 ? static_cast<double>(o.gpu_busy_ns) / static_cast<double>(o.window_ns) : 1;
  if (!rep.ranges.empty()) {
    double sum = 0;
    for (const WhatIfRange& r : rep.ranges) sum += r.busy_after;
    ec.gpu_busy_after = sum / static_cast<double>(rep.ranges.size());
  }
  std::tie(ec.spread, ec.spread_predicted) = repeats_spread(rep.ranges);
  if (rep.baseline_ranks.size() > 1)
    for (const RankStats& r : rep.baseline_ranks)
      if (r.span.length() > 0)
        ec.rank_wait = std::max(ec.rank_wait, static_cast<double>(r.waited_ns) / static_cast<double>(r.span.length()));
  ec.target = &pred.spec;
  ec.host_ranks = pred.host_ranks;
  ec.surface_share = pred.surface_share;
  ec.conv_share = pred.fused_conv_share;
  for (const Transform& tr : transforms) ec.rates_guessed = ec.rates_guessed || (!pred.spec.from_trace.empty() && tr->needs_gpu_rates());
  // The profiler's cost taken out of what the forecast runs: the time it took off each range (its
  // measured span less its baseline's), over the range's forecast; the largest. Without ranges,
  // the whole run's.
  if (pred.profiler_removed_ns > 0) {
    auto share = [](TimeNs measured, TimeNs baseline, TimeNs predicted) {
      return predicted > 0 ? std::max(0.0, static_cast<double>(measured - baseline) / static_cast<double>(predicted)) : 0.0;
    };
    for (const WhatIfRange& r : rep.ranges)
      ec.profiler_share = std::max(ec.profiler_share, share(r.measured_span_ns, r.baseline_ns, r.predicted_ns));
    if (rep.ranges.empty()) ec.profiler_share = share(rep.measured.length(), rep.baseline.length(), rep.predicted.length());
    ec.profiler_cv = pred.profiler_cost_cv;
    ec.host_on_path =
        rep.host_after.path_ns > 0 ? static_cast<double>(rep.host_after.host()) / static_cast<double>(rep.host_after.path_ns) : 0;
  }
  const Overlap& b = rep.baseline_overlap;
  ec.gpu_busy_before = b.window_ns > 0 ? static_cast<double>(b.gpu_busy_ns) / static_cast<double>(b.window_ns) : 1;
  if (pred.fused_host_removed_ns > 0 && rep.baseline.length() > 0)
    ec.fused_host_share = std::min(1.0, static_cast<double>(pred.fused_host_removed_ns) / static_cast<double>(rep.baseline.length()));
  rep.error_bar = error_bar(transforms, ec, rep.predicted_ns);
  for (WhatIfRange& r : rep.ranges) r.error_bar = scaled_bar(rep.error_bar, r.predicted_ns);
}

}  // namespace

// What a what-if starts from, built once for a trace and its options (all but the transforms
// after the profiler's step): the graph, the work, the engine, the baseline case and its simulation
// with what is read from it.
struct WhatIfBaseline::Impl {
  const Trace* t = nullptr;
  WhatIfOptions opt;
  std::string unidentified;
  HwSpec source;
  std::shared_ptr<const Graph> graph;
  std::unique_ptr<WhatIfEngine> engine;
  Transform unprofile;
  std::string unprofiled, unprofile_note;
  WhatIfCase base;
  WhatIfCase unprofiled_case;  // with a profiler step: the case after it alone (the forecasts resume from it)
  std::shared_ptr<const SimResult> base_sim;
  Span measured, baseline;
  std::vector<RankStats> baseline_ranks;
  Overlap baseline_overlap;
  std::vector<RangeSpan> ranges;  // with a range regex: the baseline's
  std::vector<std::string> cp;    // without: the baseline's critical path (device-op names)
  std::vector<TimeNs> slack;      // the baseline's slack
};

WhatIfBaseline::WhatIfBaseline(const Trace& t, const WhatIfOptions& opt) {
  auto impl = std::make_shared<Impl>();
  Impl& b = *impl;
  b.t = &t;
  b.opt = opt;
  b.source = unidentified_source(t, opt, b.unidentified);
  Graph built = build_graph(t);
  WorkTable work = estimate_work(t, b.source);
  // Sharing takes the persistent GEMMs' tiles from the work (HBM demands stay by class).
  if (opt.sharing && t.measured && b.unidentified.empty() && b.source.from_trace.empty()) enable_sharing(built, b.source, &work, false);
  b.graph = std::make_shared<const Graph>(std::move(built));
  b.engine = std::make_unique<WhatIfEngine>(t, b.graph, b.source, std::move(work));
  std::vector<Transform> rest;
  b.unprofile = unprofile_step(t, opt, rest, b.unprofiled);
  if (b.unprofile && opt.unprofiled_time > 0) b.unprofile = scaled_unprofile(t, *b.engine, opt, b.unprofile_note);
  if (b.unprofile) {
    b.unprofiled_case = b.engine->prefix({b.unprofile});
    b.base = b.engine->resume(b.unprofiled_case, {});
  } else {
    b.base = b.engine->baseline();
  }
  const Graph& bg = *b.base.graph;
  b.base_sim = std::make_shared<const SimResult>(simulate(bg, VectorCostModel(b.base.durations, "baseline")));
  const SimResult& base_sim = *b.base_sim;
  b.measured = device_span(bg, measured_schedule(t));
  b.baseline = device_span(bg, sim_schedule(base_sim));
  b.baseline_ranks = rank_stats(bg, sim_schedule(base_sim));
  b.baseline_overlap = compute_overlap(bg, sim_schedule(base_sim));
  if (opt.range_regex) {
    b.ranges = range_spans(bg, base_sim, range_regex(*opt.range_regex));
  } else {
    const TimeNs b0 = b.baseline.begin;
    b.cp = cp_names(bg, critical_path(base_sim, last_device_op(bg, sim_schedule(base_sim)), [&](OpId o) { return base_sim.end[o] > b0; }));
  }
  b.slack = compute_slack(bg, base_sim);
  impl_ = std::move(impl);
}

WhatIfReport WhatIfBaseline::run(const std::vector<Transform>& user) const {
  const Impl& b = *impl_;
  const Trace& t = *b.t;
  WhatIfOptions opt = b.opt;
  opt.transforms = user;
  // The profiler's step first, then the user's transforms (unprofile_step); a profiler step other
  // than the baseline's gets a baseline of its own.
  std::vector<Transform> transforms;
  std::string name;
  const Transform u = unprofile_step(t, opt, transforms, name);
  const bool own = b.opt.unprofiled_time > 0 ? static_cast<bool>(u) == static_cast<bool>(b.unprofile)
                                             : (u ? u->text : std::string()) == (b.unprofile ? b.unprofile->text : std::string());
  if (!own) return WhatIfBaseline(t, opt).run(user);
  if (u) transforms.front() = b.unprofile;  // scaled to a measured unprofiled time, where it was
  std::string unidentified;
  (void)unidentified_source(t, opt, unidentified);  // a transform on the GPU's rates without them: stops here
  WhatIfReport rep;
  rep.trace = &t;
  rep.unprofiled = b.unprofiled;
  rep.unprofile_note = b.unprofile_note;
  const WhatIfEngine& engine = *b.engine;
  rep.source_hw = b.source.name;
  const WhatIfCase& base = b.base;
  // With the profiler's step, from the case after it (its graph shared until a transform edits it).
  WhatIfCase pred =
      u ? engine.resume(b.unprofiled_case, std::vector<Transform>(transforms.begin() + 1, transforms.end())) : engine.apply(transforms);
  rep.log = pred.log;
  rep.host_gaps_removed_ns = pred.host_gaps_removed_ns;
  if (!b.unidentified.empty()) rep.log.insert(rep.log.begin(), b.unidentified);
  if (!b.source.from_trace.empty()) rep.log.insert(rep.log.begin(), b.source.from_trace);
  if (b.unprofile)  // the profiler's line apart from the user's transforms
    for (auto it = rep.log.begin(); it != rep.log.end(); ++it)
      if (it->rfind("--unprofile", 0) == 0) {
        rep.unprofile_log = *it + (rep.unprofile_note.empty() ? "" : "; " + rep.unprofile_note);
        rep.log.erase(it);
        break;
      }
  rep.target_hw = pred.spec.name;
  rep.memory = pred.memory;
  rep.memory_capacity = pred.spec.gpu.memory_bytes;
  rep.base_graph = base.graph;
  rep.pred_graph = pred.graph;
  const Graph& bg = *base.graph;
  const Graph& pg = *pred.graph;
  rep.base_sim = b.base_sim;
  rep.pred_sim = simulate(pg, VectorCostModel(pred.durations, "predicted"));
  rep.measured = b.measured;
  rep.baseline = b.baseline;
  rep.predicted = device_span(pg, sim_schedule(rep.pred_sim));
  rep.baseline_ranks = b.baseline_ranks;
  rep.predicted_ranks = rank_stats(pg, sim_schedule(rep.pred_sim));
  rep.baseline_overlap = b.baseline_overlap;
  rep.predicted_overlap = compute_overlap(pg, sim_schedule(rep.pred_sim));
  rep.has_amdahl = pred.scale_factor > 0;
  rep.amdahl_factor = pred.scale_factor;

  std::vector<OpId> all_dev;
  for (OpId i = 0; i < t.ops.size(); ++i)
    if (is_device_op(t.ops[i].kind)) all_dev.push_back(i);
  std::vector<std::string> before_cp, after_cp;
  std::vector<double> meas;  // the ranges' measured spans (their forecasts' center: repeats_center)
  if (opt.range_regex) {
    Regex re = range_regex(*opt.range_regex);
    const std::vector<RangeSpan>& bs = b.ranges;
    std::vector<RangeSpan> ps = range_spans(pg, rep.pred_sim, re);
    const std::vector<bool> every(pg.num_nodes(), true);
    std::vector<double> bv, p, am;
    for (std::size_t k = 0; k < bs.size(); ++k) {
      if (bs[k].nodes.empty()) continue;
      WhatIfRange wr;
      wr.name = bs[k].name;
      wr.start_ns = bs[k].start_ns;
      wr.rank = bs[k].rank;
      wr.measured_span_ns = bs[k].measured.length();
      wr.baseline_ns = bs[k].simulated.length();
      wr.predicted_ns = ps[k].nodes.empty() ? 0 : ps[k].simulated.length();
      if (rep.has_amdahl && wr.baseline_ns > 0) {
        wr.amdahl_fraction = static_cast<double>(busy_union(bs[k].nodes, pred.scaled, *rep.base_sim)) / static_cast<double>(wr.baseline_ns);
        wr.amdahl_ns = amdahl_ns(wr.baseline_ns, wr.amdahl_fraction, rep.amdahl_factor);
      }
      wr.cp_before = cp_names(bg, range_critical_path(*rep.base_sim, bs[k]));
      wr.path_after = range_critical_path(rep.pred_sim, ps[k]);
      wr.busy_after = wr.predicted_ns > 0
                          ? static_cast<double>(busy_union(ps[k].nodes, every, rep.pred_sim)) / static_cast<double>(wr.predicted_ns)
                          : 1;
      wr.cp_after = cp_names(pg, wr.path_after);
      meas.push_back(static_cast<double>(wr.measured_span_ns));
      bv.push_back(static_cast<double>(wr.baseline_ns));
      p.push_back(static_cast<double>(wr.predicted_ns));
      am.push_back(wr.amdahl_fraction);
      rep.ranges.push_back(std::move(wr));
    }
    if (rep.ranges.empty()) throw InputError(t.source, "--range '" + *opt.range_regex + "' matches no range with device ops");
    rep.measured_ns = static_cast<TimeNs>(repeats_center(meas, meas));
    rep.baseline_ns = static_cast<TimeNs>(repeats_center(bv, meas));
    rep.predicted_ns = static_cast<TimeNs>(repeats_center(p, meas));
    rep.amdahl_fraction = repeats_center(am, meas);
    // The critical paths shown are a typical range's: the first whose measured span is nearest
    // their median (the first range is often a warm-up step, or holds a pause).
    const double mid = median(meas);
    std::size_t typical = 0;
    for (std::size_t k = 1; k < meas.size(); ++k)
      if (std::abs(meas[k] - mid) < std::abs(meas[typical] - mid)) typical = k;
    before_cp = rep.ranges[typical].cp_before;
    after_cp = rep.ranges[typical].cp_after;
    rep.host_after = host_on_path(pg, rep.pred_sim, rep.ranges[typical].path_after);
  } else {
    rep.measured_ns = rep.measured.length();
    rep.baseline_ns = rep.baseline.length();
    rep.predicted_ns = rep.predicted.length();
    if (rep.has_amdahl && rep.baseline_ns > 0)
      rep.amdahl_fraction = static_cast<double>(busy_union(all_dev, pred.scaled, *rep.base_sim)) / static_cast<double>(rep.baseline_ns);
    const TimeNs p0 = rep.predicted.begin;
    before_cp = b.cp;
    const std::vector<OpId> path =
        critical_path(rep.pred_sim, last_device_op(pg, sim_schedule(rep.pred_sim)), [&](OpId o) { return rep.pred_sim.end[o] > p0; });
    after_cp = cp_names(pg, path);
    rep.host_after = host_on_path(pg, rep.pred_sim, path);
  }
  if (rep.has_amdahl) rep.amdahl_ns = amdahl_ns(rep.baseline_ns, rep.amdahl_fraction, rep.amdahl_factor);
  rep.speedup = rep.predicted_ns > 0 ? static_cast<double>(rep.baseline_ns) / static_cast<double>(rep.predicted_ns) : 0;
  std::set<std::string> bset(before_cp.begin(), before_cp.end()), aset(after_cp.begin(), after_cp.end());
  for (const auto& n : aset)
    if (!bset.count(n)) rep.onto_cp.push_back(n);
  for (const auto& n : bset)
    if (!aset.count(n)) rep.off_cp.push_back(n);
  // Slack changes of the trace's device ops.
  const std::vector<TimeNs>& sb = b.slack;
  auto sp = compute_slack(pg, rep.pred_sim);
  std::vector<OpId> changed;
  for (OpId o : all_dev)
    if (sb[o] != sp[o]) changed.push_back(o);
  // The 50 largest changes (a total order: ties by op id), sorted.
  const std::size_t shown = std::min<std::size_t>(changed.size(), 50);
  std::partial_sort(changed.begin(), changed.begin() + static_cast<std::ptrdiff_t>(shown), changed.end(), [&](OpId x, OpId y) {
    auto dx = std::llabs(sp[x] - sb[x]), dy = std::llabs(sp[y] - sb[y]);
    return dx != dy ? dx > dy : x < y;
  });
  for (std::size_t k = 0; k < shown; ++k)
    rep.slack_changes.push_back({t.name(t.ops[changed[k]]), changed[k], sb[changed[k]], sp[changed[k]]});
  // Where the user combined transforms, how far each one's family's error carries into the combined
  // forecast (ErrorContext::carry_ratio). A family's error was measured with its transform alone, a
  // fraction of that forecast F_i; what the transform misjudges goes with the time it changes: |B -
  // F_i| alone (B the baseline), |F_-i - F| in the combination (F_-i: all the others without it; F:
  // all). So as a fraction of F it is r_i = F_i / F x |F_-i - F| / |B - F_i| times its family's. A
  // target GPU (--hw) rescales every kernel: its error stays a fraction of the forecast and it is in
  // every forecast here, B included. A transform that changes the forecast under 1 % alone keeps
  // its family as measured. In the forecast's own terms (its ranges' center with --range); one or
  // two more simulations a transform (none for the forecast itself or, without --hw, for B).
  std::vector<double> carry(transforms.size(), 1.0), share(transforms.size(), 0.0);  // r_i; |F_-i - F| / F
  const std::size_t first = u ? 1 : 0;
  auto retargets = [](const Transform& tr) { return tr->text.rfind("--hw", 0) == 0; };
  std::vector<std::size_t> users;  // the combination's transforms but --hw
  bool hw = false;
  for (std::size_t k = first; k < transforms.size(); ++k) {
    if (retargets(transforms[k]))
      hw = true;
    else
      users.push_back(k);
  }
  // A transform that changes nothing (its forecast alone is the baseline's, and the combination's
  // without it the combination's, within a millionth) carries none of its family's error (r = 0).
  if (users.size() == 1 && !hw && rep.predicted_ns == rep.baseline_ns) carry[users[0]] = 0;
  if (users.size() >= 2 && users.size() <= 8) {
    const unsigned all = (1u << users.size()) - 1;
    const std::optional<Regex> re = opt.range_regex ? std::optional<Regex>(range_regex(*opt.range_regex)) : std::nullopt;
    std::map<unsigned, double> memo = {{all, static_cast<double>(rep.predicted_ns)}};  // a subset of `users` -> its forecast (0: none)
    if (!hw) memo[0] = static_cast<double>(rep.baseline_ns);
    auto forecast = [&](unsigned bits) {
      if (auto it = memo.find(bits); it != memo.end()) return it->second;
      double f = 0;
      try {
        std::vector<Transform> sub;
        for (std::size_t k = first, j = 0; k < transforms.size(); ++k)
          if (retargets(transforms[k]) || ((bits >> j++) & 1u)) sub.push_back(transforms[k]);
        const WhatIfCase c = u ? engine.resume(b.unprofiled_case, sub) : engine.apply(sub);
        const SimResult s = simulate(*c.graph, VectorCostModel(c.durations, "alone"));
        if (!re) {
          f = static_cast<double>(device_span(*c.graph, sim_schedule(s)).length());
        } else {
          const std::vector<RangeSpan> rs = range_spans(*c.graph, s, *re);
          std::vector<double> p;
          for (std::size_t k = 0; k < b.ranges.size() && k < rs.size(); ++k)
            if (!b.ranges[k].nodes.empty()) p.push_back(rs[k].nodes.empty() ? 0.0 : static_cast<double>(rs[k].simulated.length()));
          if (p.size() == meas.size()) f = repeats_center(p, meas);
        }
      } catch (const std::exception&) {  // only the interval depends on it: the family as measured
        f = 0;
      }
      return memo[bits] = f;
    };
    const double whole = memo[all], from = forecast(0);
    for (std::size_t j = 0; j < users.size() && whole > 0 && from > 0; ++j) {
      const double by_itself = forecast(1u << j), others = forecast(all & ~(1u << j));
      const double moved = std::abs(from - by_itself);
      if (by_itself > 0 && others > 0 && moved <= 1e-6 * from && std::abs(others - whole) <= 1e-6 * whole) {
        carry[users[j]] = 0;
      } else if (by_itself > 0 && others > 0 && moved >= 0.01 * from) {
        carry[users[j]] = by_itself / whole * std::abs(others - whole) / moved;
        share[users[j]] = std::abs(others - whole) / whole;
      }
    }
  }
  attach_error_bars(rep, transforms, pred, std::move(carry), std::move(share));
  return rep;
}

const WorkTable& WhatIfBaseline::work() const { return impl_->engine->work(); }

WhatIfReport run_whatif(const Trace& t, const WhatIfOptions& opt) { return WhatIfBaseline(t, opt).run(opt.transforms); }

}  // namespace bneck
