#include "models/serving/calibrate.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "sim/analysis/ranges.hpp"
#include "sim/base/error.hpp"

namespace bneck::serve {

namespace {

struct StepObs {
  std::uint32_t range = 0;  // the forward range
  StepShape shape;
  TimeNs prepare = -1, update = -1;
  TimeNs gpu = 0, first_kernel = -1, last_launch = -1;
  std::int64_t kernels = 0;
  std::pair<double, double> key;  // the shape as the engine keys it: (qpad, kvpad) when given, else (q, kv)
  std::vector<std::pair<TimeNs, TimeNs>> launches;  // launch calls inside the forward: start, end
};

// "forward q=512 kv=3119 seqs=11 qkv=...": the shape, or nullopt if q, kv or seqs is missing.
bool parse_shape(const std::string& name, StepShape& s, std::pair<double, double>& key) {
  if (name.rfind("forward", 0) != 0) return false;
  std::map<std::string, double> kv;
  std::istringstream in(name.substr(7));
  std::string tok;
  while (in >> tok) {
    auto eq = tok.find('=');
    if (eq == std::string::npos) continue;
    try {
      std::size_t used = 0;
      double v = std::stod(tok.substr(eq + 1), &used);
      if (used == tok.size() - eq - 1 && std::isfinite(v) && v >= 0 && v < 1e15) kv[tok.substr(0, eq)] = v;
    } catch (...) {
    }
  }
  if (!kv.count("q") || !kv.count("kv") || !kv.count("seqs")) return false;
  s.q = static_cast<std::int64_t>(kv["q"]);
  s.kv = static_cast<std::int64_t>(kv["kv"]);
  s.seqs = static_cast<std::int64_t>(kv["seqs"]);
  s.logits = s.seqs;
  s.qkv_seq = kv.count("qkv") ? kv["qkv"] : static_cast<double>(s.q) * static_cast<double>(s.kv) / std::max<double>(1, static_cast<double>(s.seqs));
  key = {kv.count("qpad") ? kv["qpad"] : kv["q"], kv.count("kvpad") ? kv["kvpad"] : kv["kv"]};
  return s.seqs > 0 && s.q > 0;
}

// NNLS with one pass of outlier removal: rows whose residual exceeds 5 median absolute residuals
// (a garbage collection or a descheduled thread inside a step) are dropped and the fit repeated.
std::vector<double> robust_nnls(const std::vector<std::vector<double>>& a, const std::vector<double>& b, double* rms) {
  std::vector<double> x = nnls(a, b, rms);
  std::vector<double> res(b.size());
  for (std::size_t i = 0; i < b.size(); ++i) {
    double p = 0;
    for (std::size_t k = 0; k < x.size(); ++k) p += a[i][k] * x[k];
    res[i] = std::abs(p - b[i]);
  }
  const double mad = median(res);
  if (mad <= 0) return x;
  std::vector<std::vector<double>> a2;
  std::vector<double> b2;
  for (std::size_t i = 0; i < b.size(); ++i)
    if (res[i] <= 5 * mad) a2.push_back(a[i]), b2.push_back(b[i]);
  if (a2.size() < a[0].size() + 2) return x;
  return nnls(a2, b2, rms);
}

std::string fmt(double v, int prec = 3) {
  std::ostringstream o;
  o.precision(prec);
  o << v;
  return o.str();
}

}  // namespace

CalibrationReport calibrate_step_model(const Trace& trace, StepCostModel& m) {
  CalibrationReport rep;
  // Forward ranges with shapes, per thread lane, by start.
  std::vector<StepObs> obs;
  std::map<LaneId, std::vector<std::size_t>> by_lane;
  for (std::uint32_t i = 0; i < trace.ranges.size(); ++i) {
    const Range& r = trace.ranges[i];
    StepObs o;
    if (!parse_shape(trace.strings.str(r.name), o.shape, o.key) || r.end <= r.start) continue;
    o.range = i;
    by_lane[r.lane].push_back(obs.size());
    obs.push_back(o);
  }
  if (obs.size() < 8)
    throw InputError(trace.source, "found " + std::to_string(obs.size()) +
                                       " engine steps; calibration needs ranges named 'forward q=N kv=N seqs=N' around each step's forward (at least 8; see README, bneck serve)");
  for (auto& [lane, v] : by_lane)
    std::sort(v.begin(), v.end(), [&](std::size_t a, std::size_t b) { return trace.ranges[obs[a].range].start < trace.ranges[obs[b].range].start; });
  // Sibling prepare/update ranges under the same parent.
  for (auto& o : obs) {
    const Range& f = trace.ranges[o.range];
    if (f.parent == kNone) continue;
    for (std::uint32_t k = f.parent + 1; k < trace.ranges.size() && k < f.parent + 64; ++k) {
      const Range& r = trace.ranges[k];
      if (r.parent != f.parent || r.lane != f.lane) continue;
      const std::string& n = trace.strings.str(r.name);
      if (n == "prepare") o.prepare = r.end - r.start;
      if (n == "update") o.update = r.end - r.start;
    }
  }
  // The forward range holding an API op: binary search in its lane's forwards.
  auto holder = [&](const Op& api) -> StepObs* {
    auto it = by_lane.find(api.lane);
    if (it == by_lane.end()) return nullptr;
    const auto& v = it->second;
    auto pos = std::upper_bound(v.begin(), v.end(), api.start, [&](TimeNs t, std::size_t idx) { return t < trace.ranges[obs[idx].range].start; });
    if (pos == v.begin()) return nullptr;
    StepObs& o = obs[*(pos - 1)];
    return api.start < trace.ranges[o.range].end ? &o : nullptr;
  };
  for (const Op& op : trace.ops) {
    if (op.kind == OpKind::Api) {
      if (op.api_class() == ApiClass::Launch || op.api_class() == ApiClass::MemcpyAsync)
        if (StepObs* o = holder(op)) {
          o->last_launch = std::max(o->last_launch, op.end());
          o->launches.emplace_back(op.start, op.end());
        }
      continue;
    }
    if (op.link == kNone || op.link >= trace.ops.size()) continue;
    StepObs* o = holder(trace.ops[op.link]);
    if (!o) continue;
    o->gpu += op.duration();
    ++o->kernels;
    if (o->first_kernel < 0 || op.start < o->first_kernel) o->first_kernel = op.start;
  }
  std::vector<std::vector<double>> px, ux;
  std::vector<double> fy, py, uy, lags, tails, kernels;
  std::vector<const StepObs*> used;
  for (const auto& o : obs) {
    if (o.kernels == 0) continue;
    const Range& f = trace.ranges[o.range];
    used.push_back(&o);
    kernels.push_back(static_cast<double>(o.kernels));
    lags.push_back(static_cast<double>(o.first_kernel - f.start));
    if (o.last_launch > f.start) tails.push_back(static_cast<double>(f.end - o.last_launch));
    if (o.prepare >= 0) {
      px.push_back({1, static_cast<double>(o.shape.seqs), static_cast<double>(o.shape.q), static_cast<double>(o.shape.kv)});
      py.push_back(static_cast<double>(o.prepare));
    }
    if (o.update >= 0) {
      ux.push_back({1, static_cast<double>(o.shape.seqs)});
      uy.push_back(static_cast<double>(o.update));
    }
  }
  if (used.size() < 8) throw InputError(trace.source, "the engine's step ranges hold no kernels launched from them (at least 8 steps needed)");
  rep.steps = used.size();
  // GPU: fitted with each attention form; the better fit wins.
  for (const StepObs* o : used) fy.push_back(static_cast<double>(o->gpu));
  {
    double rms_seq = 0, rms_packed = 0;
    std::vector<std::vector<double>> a1, a2;
    for (const StepObs* o : used) {
      m.form = AttentionForm::PerSequence;
      auto f1 = m.features(o->shape);
      m.form = AttentionForm::Packed;
      auto f2 = m.features(o->shape);
      a1.emplace_back(f1.begin(), f1.end());
      a2.emplace_back(f2.begin(), f2.end());
    }
    auto c1 = robust_nnls(a1, fy, &rms_seq);
    auto c2 = robust_nnls(a2, fy, &rms_packed);
    m.form = rms_packed < rms_seq ? AttentionForm::Packed : AttentionForm::PerSequence;
    const auto& c = m.form == AttentionForm::Packed ? c2 : c1;
    std::copy(c.begin(), c.end(), m.gpu.begin());
    rep.gpu_rms_ns = std::min(rms_seq, rms_packed);
  }
  // Shapes met the first time (in the trace's order, the engine's warm-up included) against repeated
  // ones. With 8 or more repeated steps (an engine that serves its warm-up twice shows them), a
  // forward's launch time is theirs and the build is the first-time steps' median launch time less
  // it: everything a new shape costs the host (the plan, and the slower host work around it: 1.5 ms
  // more on the H200 machine, caches cold after the build). With fewer, the build shows as one long
  // pause between two launches of a first-time forward: its longest gap less its second-longest;
  // the launch time is then the first-time steps' less that pause.
  std::vector<char> first_time(obs.size(), 0);
  {
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < obs.size(); ++i) order.push_back(i);
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return trace.ranges[obs[a].range].start < trace.ranges[obs[b].range].start; });
    std::set<std::pair<double, double>> met;
    for (std::size_t i : order) first_time[i] = met.insert(obs[i].key).second ? 1 : 0;
  }
  struct Launch {
    double ns = 0, kernels = 0, gap1 = 0, gap2 = 0;
    bool first = false;
  };
  std::vector<Launch> ls;
  for (std::size_t i = 0; i < obs.size(); ++i) {
    StepObs& o = obs[i];
    const TimeNs start = trace.ranges[o.range].start;
    if (o.kernels == 0 || o.launches.empty() || o.last_launch <= start) continue;
    Launch l;
    l.first = first_time[i];
    l.ns = static_cast<double>(o.last_launch - start);
    l.kernels = static_cast<double>(o.kernels);
    std::sort(o.launches.begin(), o.launches.end());
    TimeNs prev = start;
    for (const auto& [b, e] : o.launches) {
      const double g = static_cast<double>(std::max<TimeNs>(0, b - prev));
      if (g > l.gap1) {
        l.gap2 = l.gap1;
        l.gap1 = g;
      } else if (g > l.gap2) {
        l.gap2 = g;
      }
      prev = std::max(prev, e);
    }
    ls.push_back(l);
  }
  auto med = [&](bool first, auto f) {
    std::vector<double> v;
    for (const auto& l : ls)
      if (l.first == first) v.push_back(f(l));
    return v.empty() ? 0.0 : median(v);
  };
  std::size_t n_first = 0;
  for (const auto& l : ls) n_first += l.first ? 1 : 0;
  const std::size_t n_repeat = ls.size() - n_first;
  m.shape_build = 0;
  std::string build_note = "no plan build per new shape seen (" + std::to_string(n_first) + " first-time shapes, " + std::to_string(n_repeat) + " repeated)";
  bool from_repeats = false;
  if (n_first >= 8) {
    double build = 0;
    std::string how;
    if (n_repeat >= 8) {
      const double first_ns = med(true, [](const Launch& l) { return l.ns; }), repeat_ns = med(false, [](const Launch& l) { return l.ns; });
      build = first_ns - repeat_ns;
      how = "first-time forwards' launch time " + fmt(first_ns / 1e6) + " ms (" + std::to_string(n_first) + " steps) less repeated ones' " +
            fmt(repeat_ns / 1e6) + " ms (" + std::to_string(n_repeat) + ")";
      from_repeats = true;
    } else {
      build = med(true, [](const Launch& l) { return l.gap1 - l.gap2; });
      how = "the longest launch gap of " + std::to_string(n_first) + " first-time forwards less their second-longest (" + std::to_string(n_repeat) +
            " repeated steps: too few to compare)";
    }
    // A build worth modelling: at least a tenth of a forward's launch time.
    if (build > 0.1 * med(!from_repeats, [](const Launch& l) { return l.ns; })) {
      m.shape_build = static_cast<TimeNs>(build);
      build_note = "shape build = " + fmt(build / 1e6) + " ms on a step whose shape (q, kv) is new: " + how;
    } else {
      from_repeats = false;
    }
  }
  if (!ls.empty()) {
    // The host issues a forward's kernels one by one whatever the batch holds: its time is the
    // kernels it launches times the median time per launch (a median, since a profiler's own
    // pauses and a garbage collection land on some steps; the sequence-dependent host work is in
    // prepare and update): of repeated shapes when the build came from them, else of every step,
    // a first-time step's build pause taken out.
    std::vector<double> per_kernel, all;
    for (const auto& l : ls) {
      if (from_repeats && l.first) continue;
      const double ns = l.ns - (m.shape_build > 0 && l.first ? l.gap1 - l.gap2 : 0);
      per_kernel.push_back(ns / l.kernels);
      all.push_back(ns);
    }
    m.launch = {median(per_kernel) * median(kernels), 0, 0};
    double ss = 0;
    for (double y : all) ss += (y - m.launch[0]) * (y - m.launch[0]);
    rep.launch_rms_ns = std::sqrt(ss / static_cast<double>(all.size()));
    m.tail = static_cast<TimeNs>(median(tails));
  }
  if (py.size() >= 8) {
    auto c = robust_nnls(px, py, &rep.prepare_rms_ns);
    std::copy(c.begin(), c.end(), m.prepare.begin());
  } else {
    m.prepare = {0, 0, 0, 0};  // no prepare ranges: the gaps between steps stand for it (see update)
  }
  if (uy.size() >= 8) {
    double r = 0;
    auto c = robust_nnls(ux, uy, &r);
    std::copy(c.begin(), c.end(), m.update.begin());
  } else {
    m.update = {0, 0};
  }
  m.lag = static_cast<TimeNs>(median(lags));
  m.kernels_per_step = median(kernels);
  m.source = "calibrated from " + trace.source;
  m.notes.clear();
  m.notes.push_back(std::to_string(used.size()) + " engine steps; " + fmt(m.kernels_per_step, 4) + " kernels per step (median)");
  m.notes.push_back("gpu = " + fmt(m.gpu[0] / 1e3) + " us + " + fmt(m.gpu[1]) + " x gemm roofline + " + fmt(m.gpu[2]) + " x attention (" +
                    to_string(m.form) + ") + " + fmt(m.gpu[3]) + " x KV read + " + fmt(m.gpu[4] / 1e3) + " us/seq + " + fmt(m.gpu[5] / 1e3) +
                    " us/token (rms " + fmt(rep.gpu_rms_ns / 1e3) + " us)");
  m.notes.push_back("launch = " + fmt(m.launch[0] / 1e3) + " us (" + fmt(m.launch[0] / 1e3 / std::max(1.0, m.kernels_per_step)) +
                    " us per kernel; rms " + fmt(rep.launch_rms_ns / 1e3) + " us); lag " + fmt(static_cast<double>(m.lag) / 1e3) + " us, tail " +
                    fmt(static_cast<double>(m.tail) / 1e3) + " us");
  m.notes.push_back("prepare = " + fmt(m.prepare[0] / 1e3) + " us + " + fmt(m.prepare[1] / 1e3) + " us/seq + " + fmt(m.prepare[2] / 1e3) +
                    " us/token + " + fmt(m.prepare[3] / 1e3) + " us/KV token; update = " + fmt(m.update[0] / 1e3) + " us + " +
                    fmt(m.update[1] / 1e3) + " us/seq");
  m.notes.push_back(build_note);
  return rep;
}

void fit_host_scale(const std::vector<Request>& log, const EngineConfig& eng, StepCostModel& m, CalibrationReport& rep, const std::string& log_path) {
  std::vector<Request> reqs;
  for (const auto& r : log)
    if (r.measured()) reqs.push_back(r);
  if (reqs.size() < 2) throw InputError(log_path, "the calibration log needs measured token times (token_times_s) for at least 2 requests");
  const Metrics meas = summarize_measured(reqs, {});
  if (meas.itl.median <= 0) throw InputError(log_path, "the calibration log has no inter-token gaps (every request has one output token)");
  auto simulated = [&](double scale, std::vector<double>* tpot) {
    m.host_scale = scale;
    ServeResult r = simulate(reqs, eng, m, false);
    Metrics s = summarize(reqs, r.requests, {});
    if (tpot) *tpot = s.req_tpot;
    return s.itl.median;
  };
  // The profiler's overhead is taken as proportional to the host's work: one scale for every host
  // term, the one that matches the median inter-token latency (which grows with the scale:
  // bisection in log space). (A second scale for the per-sequence terms alone was tried: 40
  // requests did not tell the two apart.)
  auto match = [&]() {
    double lo = 0.05, hi = 20;
    if (simulated(lo, nullptr) > meas.itl.median)
      hi = lo;
    else if (simulated(hi, nullptr) < meas.itl.median)
      lo = hi;
    else
      for (int it = 0; it < 30; ++it) {
        const double mid = std::sqrt(lo * hi);
        (simulated(mid, nullptr) < meas.itl.median ? lo : hi) = mid;
      }
    return std::sqrt(lo * hi);
  };
  m.host_var_ratio = 1;
  const double scale = match();
  std::vector<double> tp;
  simulated(scale, &tp);
  double err = 0;
  int n = 0;
  for (std::size_t i = 0; i < reqs.size(); ++i)
    if (!std::isnan(tp[i]) && !std::isnan(meas.req_tpot[i]) && tp[i] > 0 && meas.req_tpot[i] > 0) {
      const double d = std::log(tp[i] / meas.req_tpot[i]);
      err += d * d;
      ++n;
    }
  const double best_err = n ? err / n : 0;
  rep.simulated_itl_ms = simulated(scale, nullptr);
  rep.measured_itl_ms = meas.itl.median;
  m.notes.push_back("host terms x " + fmt(scale) + " to match " + log_path +
                    " (median inter-token latency " + fmt(meas.itl.median) + " ms, simulated " + fmt(rep.simulated_itl_ms) +
                    " ms; per-request TPOT rms log error " + fmt(std::sqrt(best_err)) + ")");
}

}  // namespace bneck::serve
