#include "models/serving/calibrate.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "sim/analysis/ranges.hpp"
#include "sim/analysis/structure.hpp"
#include "sim/base/error.hpp"
#include "sim/base/stats.hpp"

namespace bneck::serve {

namespace {

// One engine step as the trace shows it: from its forward range (annotated), or from a structure
// instance (its first launch to its last op's end).
struct StepObs {
  TimeNs start = 0, end = 0;  // host: the forward's start and end (the tokens are out)
  bool shaped = false;        // the shape is known (named by the range, or replayed from the log)
  StepShape shape;
  std::pair<double, double> key;  // the shape as the engine keys it: (qpad, kvpad) when given, else (q, kv)
  TimeNs prepare = -1, update = -1;  // annotated ranges
  TimeNs gap = -1;                   // unannotated: host time since the previous step's end (its update + this prepare)
  std::int64_t prev_seqs = 0;        // the previous step's sequences (with gap)
  TimeNs gpu = 0, first_kernel = -1, last_launch = -1;
  std::int64_t kernels = 0;
  std::vector<std::pair<TimeNs, TimeNs>> launches;  // launch calls of the step: start, end
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


// A step's two longest host pauses between its launches (from its start, each launch after the
// previous one returned) and the launch after the longest (0: none).
struct Pauses {
  double gap1 = 0, gap2 = 0;
  std::size_t at1 = 0;
};
Pauses pauses(const StepObs& o) {
  Pauses p;
  TimeNs prev = o.start;
  for (std::size_t k = 0; k < o.launches.size(); ++k) {
    const auto& [b, e] = o.launches[k];
    const double g = static_cast<double>(std::max<TimeNs>(0, b - prev));
    if (g > p.gap1) p.gap2 = p.gap1, p.gap1 = g, p.at1 = k;
    else if (g > p.gap2) p.gap2 = g;
    prev = std::max(prev, e);
  }
  return p;
}

// A device-to-host copy: a step's tokens on their way out (its call returns when the GPU is done).
bool is_d2h(const Trace& trace, const Op& op) {
  const CopyInfo* c = trace.copy(op);
  return op.kind == OpKind::Memcpy && c && c->copy_kind == MemcpyKind::DtoH;
}

// Steps marked by the engine ("forward q= kv= seqs=" ranges): each range's launches, kernels and
// sibling prepare/update ranges.
std::vector<StepObs> annotated_steps(const Trace& trace) {
  std::vector<StepObs> obs;
  std::vector<std::uint32_t> range_of;
  std::map<LaneId, std::vector<std::size_t>> by_lane;
  for (std::uint32_t i = 0; i < trace.ranges.size(); ++i) {
    const Range& r = trace.ranges[i];
    StepObs o;
    if (!parse_shape(trace.strings.str(r.name), o.shape, o.key) || r.end <= r.start) continue;
    o.shaped = true;
    o.start = r.start;
    o.end = r.end;
    by_lane[r.lane].push_back(obs.size());
    obs.push_back(o);
    range_of.push_back(i);
  }
  for (auto& [lane, v] : by_lane) std::sort(v.begin(), v.end(), [&](std::size_t a, std::size_t b) { return obs[a].start < obs[b].start; });
  // Sibling prepare/update ranges under the same parent.
  for (std::size_t i = 0; i < obs.size(); ++i) {
    const Range& f = trace.ranges[range_of[i]];
    if (f.parent == kNone) continue;
    for (std::uint32_t k = f.parent + 1; k < trace.ranges.size() && k < f.parent + 64; ++k) {
      const Range& r = trace.ranges[k];
      if (r.parent != f.parent || r.lane != f.lane) continue;
      const std::string& n = trace.strings.str(r.name);
      if (n == "prepare") obs[i].prepare = r.end - r.start;
      if (n == "update") obs[i].update = r.end - r.start;
    }
  }
  // The forward range holding an API op: binary search in its lane's forwards.
  auto holder = [&](const Op& api) -> StepObs* {
    auto it = by_lane.find(api.lane);
    if (it == by_lane.end()) return nullptr;
    const auto& v = it->second;
    auto pos = std::upper_bound(v.begin(), v.end(), api.start, [&](TimeNs t, std::size_t idx) { return t < obs[idx].start; });
    if (pos == v.begin()) return nullptr;
    StepObs& o = obs[*(pos - 1)];
    return api.start < o.end ? &o : nullptr;
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
  for (auto& o : obs) std::sort(o.launches.begin(), o.launches.end());
  std::sort(obs.begin(), obs.end(), [](const StepObs& a, const StepObs& b) { return a.start < b.start; });
  return obs;
}

// One step from its device ops (launch order): its launches, kernels and GPU time; from its first
// launch to its last op's end (or its last launch's return: a blocking copy).
StepObs step_of_ops(const Trace& trace, const std::vector<OpId>& ops) {
  StepObs o;
  for (OpId id : ops) {
    const Op& op = trace.ops[id];
    o.gpu += op.duration();
    ++o.kernels;
    o.end = std::max(o.end, op.end());
    if (o.first_kernel < 0 || op.start < o.first_kernel) o.first_kernel = op.start;
    if (op.link == kNone || op.link >= trace.ops.size()) continue;
    const Op& api = trace.ops[op.link];
    o.end = std::max(o.end, api.end());
    // A copy to the host blocks its call until the GPU is done: the launching ends where it starts.
    const TimeNs launched = is_d2h(trace, op) ? api.start : api.end();
    o.last_launch = std::max(o.last_launch, launched);
    o.launches.emplace_back(api.start, launched);
  }
  std::sort(o.launches.begin(), o.launches.end());
  o.launches.erase(std::unique(o.launches.begin(), o.launches.end()), o.launches.end());  // a graph's nodes share their launch
  if (!o.launches.empty()) o.start = o.launches.front().first;
  return o;
}

// The steps of an engine from a plain profile. A step ends when its sampled tokens reach the host:
// one device-to-host copy a step, which the host waits for. So on the thread that launches most
// device ops, the steps are its launches up to each such copy, when these segments are about as
// long as the iterations structure recognition finds (their median at least half the iterations'
// median op count: one copy a step); else the iterations themselves (alike, not equal: the batch
// changes the kernels).
std::vector<StepObs> engine_steps(const Trace& trace, std::string& how) {
  const Structure st = find_structure(trace);
  const StructureLevel* it = st.level("iteration");
  if (!it || it->instances.size() < 8) {
    how = "structure recognition found no repeating step";
    return {};
  }
  std::vector<double> sizes;
  for (const auto& in : it->instances) sizes.push_back(static_cast<double>(in.ops.size()));
  const double iteration_ops = median(sizes);
  std::map<LaneId, std::size_t> per_lane;
  for (const Op& op : trace.ops)
    if (is_device_op(op.kind) && op.link != kNone && op.link < trace.ops.size()) ++per_lane[trace.ops[op.link].lane];
  LaneId lane = kNone;
  std::size_t most = 0;
  for (const auto& [l, c] : per_lane)
    if (c > most) most = c, lane = l;
  std::vector<OpId> seq;
  for (OpId i = 0; i < trace.ops.size(); ++i) {
    const Op& op = trace.ops[i];
    if (is_device_op(op.kind) && op.link != kNone && op.link < trace.ops.size() && trace.ops[op.link].lane == lane) seq.push_back(i);
  }
  std::stable_sort(seq.begin(), seq.end(), [&](OpId x, OpId y) { return trace.ops[trace.ops[x].link].start < trace.ops[trace.ops[y].link].start; });
  std::vector<std::vector<OpId>> segs(1);
  for (OpId i : seq) {
    segs.back().push_back(i);
    if (is_d2h(trace, trace.ops[i])) segs.emplace_back();
  }
  segs.pop_back();  // launches after the last copy: no step's end
  std::vector<double> seg_sizes;
  for (const auto& g : segs) seg_sizes.push_back(static_cast<double>(g.size()));
  const double seg_ops = median(seg_sizes);
  std::vector<StepObs> obs;
  if (segs.size() >= 8 && seg_ops >= 0.5 * iteration_ops) {
    how = "one device-to-host copy a step (its tokens): " + std::to_string(segs.size()) + " steps of " + fmt(seg_ops, 4) +
          " device ops (median); structure recognition: " + it->how;
    for (const auto& g : segs) obs.push_back(step_of_ops(trace, g));
  } else {
    how = "structure recognition: " + it->how;
    for (const auto& in : it->instances) obs.push_back(step_of_ops(trace, in.ops));
  }
  std::erase_if(obs, [](const StepObs& o) { return o.launches.empty(); });
  return obs;
}

// The request log of the traced run aligned with the steps found: its clock offset (each token out
// between its step's end and the next step's start), then the scheduler replayed over the steps
// (replay_schedule) gives each its batch. Fills the steps' shapes and gaps; throws when the log
// and the steps do not agree.
void align_log(std::vector<StepObs>& steps, const TraceLog& tl, const std::string& trace_path, CalibrationReport& rep) {
  const std::vector<Request>& log = *tl.requests;
  std::vector<TimeNs> tokens;
  for (const auto& r : log) tokens.insert(tokens.end(), r.token_times.begin(), r.token_times.end());
  if (tokens.size() < 8 || steps.size() < 8)
    throw InputError(tl.path, "aligning the log with the engine steps of " + trace_path + " needs token times (token_times_s, or a vllm bench result's itls) and 8 steps; found " +
                                  std::to_string(tokens.size()) + " token times, " + std::to_string(steps.size()) + " steps");
  std::sort(tokens.begin(), tokens.end());
  const std::size_t n = steps.size();
  std::vector<TimeNs> ends(n);
  std::vector<double> gaps;
  for (std::size_t k = 0; k < n; ++k) ends[k] = steps[k].end;
  for (std::size_t k = 1; k < n; ++k) gaps.push_back(static_cast<double>(std::max<TimeNs>(0, steps[k].start - steps[k - 1].end)));
  const double gap_med = median(gaps);
  const TimeNs tol = static_cast<TimeNs>(std::max(20e3, 0.25 * gap_med));
  // The step a token (on the trace's clock) comes out after, or -1 when it falls inside a step.
  auto step_of = [&](TimeNs x) -> std::ptrdiff_t {
    const std::ptrdiff_t k = std::upper_bound(ends.begin(), ends.end(), x + tol) - ends.begin() - 1;
    if (k < 0) return -1;
    const TimeNs next = k + 1 < static_cast<std::ptrdiff_t>(n) ? steps[static_cast<std::size_t>(k) + 1].start : ends[static_cast<std::size_t>(k)] + static_cast<TimeNs>(4 * gap_med);
    return x <= next + tol ? k : -1;
  };
  std::vector<TimeNs> sample;
  const std::size_t stride = std::max<std::size_t>(1, tokens.size() / 4000);
  for (std::size_t i = 0; i < tokens.size(); i += stride) sample.push_back(tokens[i]);
  TimeNs offset = 0;  // log clock = trace clock + offset
  std::size_t best = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const TimeNs d = tokens.front() - ends[k];
    std::size_t hit = 0;
    for (TimeNs t : sample) hit += step_of(t - d) >= 0 ? 1 : 0;
    if (hit > best) best = hit, offset = d;
  }
  // Refined: every token at or after its step's end (the engine records a token once it is out).
  // (a low quantile, not the minimum: one token recorded early must not move the clock)
  std::vector<TimeNs> after_end;
  for (TimeNs t : tokens)
    if (std::ptrdiff_t k = step_of(t - offset); k >= 0) after_end.push_back(t - ends[static_cast<std::size_t>(k)]);
  if (!after_end.empty()) offset += std::clamp<TimeNs>(quantile(after_end, 0.02) - offset, -tol, tol);
  // The log's steps: from the first step that starts after its first arrival to the one its last token follows.
  TimeNs first_arrival = std::numeric_limits<TimeNs>::max();
  for (const auto& r : log) first_arrival = std::min(first_arrival, r.arrival);
  std::size_t k0 = 0;
  while (k0 < n && steps[k0].start + offset < first_arrival) ++k0;
  std::size_t k1 = n;
  while (k1 > k0 && ends[k1 - 1] + offset > tokens.back() + tol) --k1;
  if (k1 - k0 < 8)
    throw InputError(tl.path, "cannot align the log with " + trace_path + ": " + std::to_string(n) + " engine steps found, " + std::to_string(k1 - k0) +
                                  " of them between the log's first arrival and last token; is it the log of the traced run?");
  // Scheduling times: after the previous step's last token out (its update), before this step's first launch.
  std::vector<TimeNs> last_token(n, std::numeric_limits<TimeNs>::min());
  for (TimeNs t : tokens)
    if (std::ptrdiff_t k = step_of(t - offset); k >= 0) last_token[static_cast<std::size_t>(k)] = std::max(last_token[static_cast<std::size_t>(k)], t);
  std::vector<MeasuredStep> ms;
  for (std::size_t k = k0; k < k1; ++k) {
    MeasuredStep m;
    m.emit = ends[k] + offset;
    m.sched = steps[k].start + offset;
    if (k > 0 && static_cast<double>(steps[k].start - ends[k - 1]) < 4 * gap_med)
      m.sched = std::min(m.sched, std::max(ends[k - 1] + offset, last_token[k - 1]));
    ms.push_back(m);
  }
  std::vector<Request> reqs = log;
  std::stable_sort(reqs.begin(), reqs.end(), [](const Request& a, const Request& b) { return a.arrival < b.arrival; });
  const ServeResult r = replay_schedule(reqs, tl.engine, ms);
  // Agreement: each measured token on the step the scheduler gives it.
  std::size_t agree = 0, total = 0;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    const auto& meas = reqs[i].token_times;
    const auto& sim = r.requests[i].token_times;
    total += meas.size();
    for (std::size_t j = 0; j < meas.size() && j < sim.size(); ++j) agree += step_of(meas[j] - offset) == step_of(sim[j] - offset) ? 1 : 0;
  }
  std::size_t empty = 0;
  for (std::size_t i = 0; i < r.steps.size(); ++i) {
    StepObs& o = steps[k0 + i];
    const StepShape& sh = r.steps[i].shape;
    if (sh.seqs == 0) {
      ++empty;
      continue;
    }
    o.shaped = true;
    o.shape = sh;
    o.key = {static_cast<double>(sh.q), static_cast<double>(sh.kv)};
  }
  for (std::size_t k = k0 + 1; k < k1; ++k)
    if (steps[k].shaped && steps[k - 1].shaped && static_cast<double>(steps[k].start - steps[k - 1].end) < 4 * gap_med) {
      steps[k].gap = steps[k].start - steps[k - 1].end;
      steps[k].prev_seqs = steps[k - 1].shape.seqs;
    }
  rep.steps_found = n;
  rep.steps_in_log = k1 - k0;
  rep.steps_scheduled = r.steps.size() - empty;
  rep.tokens = total;
  rep.tokens_agreeing = agree;
  rep.log_offset_ns = offset;
  const double share = total ? static_cast<double>(agree) / static_cast<double>(total) : 0;
  rep.alignment = std::to_string(n) + " engine steps found (" + rep.steps_from + "); " + tl.path + " aligned at " + fmt(static_cast<double>(offset) / 1e9, 6) +
                  " s: " + std::to_string(k1 - k0) + " steps from its first arrival (" + std::to_string(k0) + " before: not its requests), the scheduler fills " +
                  std::to_string(rep.steps_scheduled) + "; " + std::to_string(agree) + " of " + std::to_string(total) + " tokens (" + fmt(100 * share) +
                  " %) come out on the step the scheduler gives them";
  if (share < 0.9)
    throw InputError(tl.path, "disagrees with the engine steps of " + trace_path + ": " + std::to_string(agree) + " of " + std::to_string(total) + " tokens (" +
                                  fmt(100 * share) + " %) come out on the step the scheduler gives them (" + std::to_string(n) + " steps found, " +
                                  std::to_string(k1 - k0) + " from the log's first arrival, " + std::to_string(rep.steps_scheduled) +
                                  " filled); give the engine's settings as it ran (--max-batch-tokens, --max-seqs, --chunked-prefill, --num-blocks) and the log of the traced run");
}

// Steps that met a shape the first time (they pay its plan build), from the trace itself: a step
// that builds a plan pauses once between two launches, far longer than its other pauses. Split at
// the crossing of a tenth of the median launch time when the sorted (longest - second-longest gap)
// values jump 5x there; every step when all pause above it and their shapes (where known) are
// nearly all new; else by shape key in trace order. 1: first time, 0: repeated, -1: unknown.
std::vector<int> first_time_steps(const std::vector<StepObs>& obs, std::string& how) {
  std::vector<double> pause(obs.size(), 0), launch;
  for (std::size_t i = 0; i < obs.size(); ++i) {
    const StepObs& o = obs[i];
    const Pauses p = pauses(o);
    pause[i] = std::max(1e3, p.gap1 - p.gap2);  // 1 us: pauses below are noise
    if (o.last_launch > o.start) launch.push_back(static_cast<double>(o.last_launch - o.start));
  }
  std::vector<int> by_key(obs.size(), -1);
  std::size_t shaped = 0, new_keys = 0;
  std::set<std::pair<double, double>> met;
  for (std::size_t i = 0; i < obs.size(); ++i)
    if (obs[i].shaped) {
      by_key[i] = met.insert(obs[i].key).second ? 1 : 0;
      ++shaped;
      new_keys += static_cast<std::size_t>(by_key[i]);
    }
  const double floor_ns = launch.empty() ? 0 : 0.1 * median(launch);
  std::vector<double> sorted = pause;
  std::sort(sorted.begin(), sorted.end());
  const auto cross = std::upper_bound(sorted.begin(), sorted.end(), floor_ns);
  std::vector<int> first(obs.size(), 0);
  auto split_at = [&](double split) {
    std::size_t nf = 0;
    for (std::size_t i = 0; i < obs.size(); ++i) nf += static_cast<std::size_t>(first[i] = pause[i] > split ? 1 : 0);
    how = "found by their launch pauses (over " + fmt(split / 1e6) + " ms: " + std::to_string(nf) + " of " + std::to_string(obs.size()) + " steps)";
    return first;
  };
  if (floor_ns > 0 && cross != sorted.begin() && cross != sorted.end() && *cross >= 5 * *(cross - 1)) return split_at(std::sqrt(*cross * *(cross - 1)));
  if (floor_ns > 0 && cross == sorted.begin() && shaped > 0 && new_keys * 10 >= shaped * 9) return split_at(floor_ns);
  how = "by shape, in trace order";
  return by_key;
}

// The GPU coefficients, fitted with each attention form; the better fit wins.
void fit_gpu(const std::vector<const StepObs*>& used, StepCostModel& m, CalibrationReport& rep) {
  std::vector<double> fy;
  std::vector<std::vector<double>> a1, a2;
  for (const StepObs* o : used) {
    fy.push_back(static_cast<double>(o->gpu));
    m.form = AttentionForm::PerSequence;
    auto f1 = m.features(o->shape);
    m.form = AttentionForm::Packed;
    auto f2 = m.features(o->shape);
    a1.emplace_back(f1.begin(), f1.end());
    a2.emplace_back(f2.begin(), f2.end());
  }
  double rms_seq = 0, rms_packed = 0;
  auto c1 = robust_nnls(a1, fy, &rms_seq);
  auto c2 = robust_nnls(a2, fy, &rms_packed);
  m.form = rms_packed < rms_seq ? AttentionForm::Packed : AttentionForm::PerSequence;
  const auto& c = m.form == AttentionForm::Packed ? c2 : c1;
  std::copy(c.begin(), c.end(), m.gpu.begin());
  rep.gpu_rms_ns = std::min(rms_seq, rms_packed);
}

// A step's launching: from its start to its last launch; its two longest pauses between launches.
struct Launch {
  double ns = 0, kernels = 0;
  Pauses pause;
  bool first = false;
  const StepObs* obs = nullptr;
};

// No prepare ranges: a step starts at its first launch (the batch's inputs copied in), so the rest
// of its preparation is inside the launch time; CUDA graphs keep it. The forward proper starts
// after the longest host pause before the plan build (a build happens inside the forward) or,
// without one, among the step's first 15 % of launches (validated on the marked H200 traces: the
// model's first op, 21-125 launches in). Before it: preparation, fitted to [1, seqs, q, kv] where
// shapes are known (else its median) into `prepare`; after it, the forward's launching (median),
// into m.launch.
void split_preparation(const std::vector<Launch>& ls, bool from_repeats, StepCostModel& m, std::array<double, 4>& prepare) {
  std::vector<double> pre, fwd, py;
  std::vector<std::vector<double>> px;
  for (const auto& l : ls) {
    const auto& la = l.obs->launches;
    std::size_t end = std::max<std::size_t>(2, la.size() * 15 / 100);
    if (l.first && m.shape_build > 0 && l.pause.at1 > 1) end = l.pause.at1;  // before the build's pause
    double longest = -1;
    std::size_t at = 0;
    for (std::size_t k = 1; k < la.size() && k < end; ++k)
      if (const double g = static_cast<double>(la[k].first - la[k - 1].second); g > longest) longest = g, at = k;
    const double before = static_cast<double>(la[at].first - l.obs->start);
    const double build = m.shape_build > 0 && l.first ? l.pause.gap1 - l.pause.gap2 : 0;
    if (l.obs->shaped) {
      const StepShape& sh = l.obs->shape;
      px.push_back({1, static_cast<double>(sh.seqs), static_cast<double>(sh.q), static_cast<double>(sh.kv)});
      py.push_back(before);
    }
    if (from_repeats && l.first) continue;  // (its launch time holds the whole build)
    pre.push_back(before);
    fwd.push_back(std::max(0.0, l.ns - build - before));
  }
  if (fwd.size() < 8) return;
  m.launch = {median(fwd), 0, 0};
  prepare = {median(pre), 0, 0, 0};
  if (py.size() >= 8) {  // the preparation grows with the batch (block tables, masks)
    double rms = 0;
    const auto c = robust_nnls(px, py, &rms);
    prepare = {c[0], c[1], c[2], c[3]};
  }
}

// The forward's host time and the plan build per new shape. With 8 or more repeated steps, a
// forward's launch time is theirs and the build is the first-time steps' median launch time less
// it: everything a new shape costs the host (the plan, and the slower host work around it: 1.5 ms
// more on the H200 machine, caches cold after the build). With fewer, the build shows as one long
// pause between two launches of a first-time forward: its longest gap less its second-longest; the
// launch time is then the first-time steps' less that pause. The host issues a forward's kernels
// one by one whatever the batch holds: its time is the kernels it launches times the median time
// per launch (a median: a profiler's pauses and a garbage collection land on some steps).
std::string fit_launch(const std::vector<StepObs>& obs, StepCostModel& m, CalibrationReport& rep, double kernels_median, std::array<double, 4>* host_prepare) {
  std::string first_how;
  const std::vector<int> first_time = first_time_steps(obs, first_how);
  std::vector<Launch> ls;
  std::vector<double> tails;
  for (std::size_t i = 0; i < obs.size(); ++i) {
    const StepObs& o = obs[i];
    if (o.kernels == 0 || o.launches.empty() || o.last_launch <= o.start || first_time[i] < 0) continue;
    tails.push_back(static_cast<double>(o.end - o.last_launch));
    Launch l;
    l.first = first_time[i] == 1;
    l.obs = &o;
    l.ns = static_cast<double>(o.last_launch - o.start);
    l.kernels = static_cast<double>(o.kernels);
    l.pause = pauses(o);
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
  std::string note = "no plan build per new shape seen (" + std::to_string(n_first) + " first-time shapes, " + std::to_string(n_repeat) + " repeated; " + first_how + ")";
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
      build = med(true, [](const Launch& l) { return l.pause.gap1 - l.pause.gap2; });
      how = "the longest launch gap of " + std::to_string(n_first) + " first-time forwards less their second-longest (" + std::to_string(n_repeat) +
            " repeated steps: too few to compare)";
    }
    // A build worth modelling: at least a tenth of a forward's launch time.
    if (build > 0.1 * med(!from_repeats, [](const Launch& l) { return l.ns; })) {
      m.shape_build = static_cast<TimeNs>(build);
      note = "shape build = " + fmt(build / 1e6) + " ms on a step whose shape (q, kv) is new: " + how + "; first-time steps " + first_how;
    } else {
      from_repeats = false;
    }
  }
  if (ls.empty()) return note;
  std::vector<double> per_kernel, all;
  for (const auto& l : ls) {
    if (from_repeats && l.first) continue;
    const double ns = l.ns - (m.shape_build > 0 && l.first ? l.pause.gap1 - l.pause.gap2 : 0);
    per_kernel.push_back(ns / l.kernels);
    all.push_back(ns);
  }
  m.launch = {median(per_kernel) * kernels_median, 0, 0};
  double ss = 0;
  for (double y : all) ss += (y - m.launch[0]) * (y - m.launch[0]);
  rep.launch_rms_ns = std::sqrt(ss / static_cast<double>(all.size()));
  m.tail = static_cast<TimeNs>(median(tails));
  if (host_prepare) split_preparation(ls, from_repeats, m, *host_prepare);
  return note;
}

// The host's work around the forward: prepare and update ranges when the engine marks them, else
// the gap between a step's end and the next one's start (this step's update + the next prepare),
// where the engine did not wait for a request, fitted to [1, seqs, q, kv] of the next step and the
// sequences of this one.
void fit_host_around(const std::vector<const StepObs*>& used, StepCostModel& m, CalibrationReport& rep) {
  std::vector<std::vector<double>> px, ux, gx;
  std::vector<double> py, uy, gy;
  for (const StepObs* o : used) {
    const double seqs = static_cast<double>(o->shape.seqs), q = static_cast<double>(o->shape.q), kv = static_cast<double>(o->shape.kv);
    if (o->prepare >= 0) px.push_back({1, seqs, q, kv}), py.push_back(static_cast<double>(o->prepare));
    if (o->update >= 0) ux.push_back({1, seqs}), uy.push_back(static_cast<double>(o->update));
    if (o->gap >= 0) gx.push_back({1, seqs, q, kv, static_cast<double>(o->prev_seqs)}), gy.push_back(static_cast<double>(o->gap));
  }
  m.prepare = {0, 0, 0, 0};  // none seen: the gaps between steps stand for it
  m.update = {0, 0};
  if (py.size() >= 8) {
    auto c = robust_nnls(px, py, &rep.prepare_rms_ns);
    std::copy(c.begin(), c.end(), m.prepare.begin());
  }
  if (uy.size() >= 8) {
    double r = 0;
    auto c = robust_nnls(ux, uy, &r);
    std::copy(c.begin(), c.end(), m.update.begin());
  }
  if (py.size() < 8 && uy.size() < 8 && gy.size() >= 8) {
    auto c = robust_nnls(gx, gy, &rep.prepare_rms_ns);
    m.prepare = {c[0], c[1], c[2], c[3]};
    m.update = {0, c[4]};
  }
}

}  // namespace

CalibrationReport calibrate_step_model(const Trace& trace, StepCostModel& m, const TraceLog* log) {
  CalibrationReport rep;
  std::vector<StepObs> obs = annotated_steps(trace);
  if (obs.size() >= 8) {
    rep.steps_from = std::to_string(obs.size()) + " 'forward q= kv= seqs=' ranges";
  } else {
    obs = engine_steps(trace, rep.steps_from);
    if (!log)
      throw InputError(trace.source, "no ranges name the engine's step shapes ('forward q=N kv=N seqs=N'); " + std::to_string(obs.size()) +
                                         " steps found by structure recognition: give the request log of the traced run (--trace-log LOG) to infer their batches");
    align_log(obs, *log, trace.source, rep);
  }
  std::vector<const StepObs*> used;
  std::vector<double> lags, kernels;
  for (const auto& o : obs) {
    if (o.kernels == 0) continue;
    kernels.push_back(static_cast<double>(o.kernels));
    if (o.first_kernel >= 0) lags.push_back(static_cast<double>(o.first_kernel - o.start));
    if (o.shaped) used.push_back(&o);
  }
  if (used.size() < 8) throw InputError(trace.source, "the engine's steps hold no kernels launched from them (at least 8 steps with a known shape needed)");
  rep.steps = used.size();
  fit_gpu(used, m, rep);
  m.kernels_per_step = median(kernels);
  bool host_ranges = false;
  for (const StepObs* o : used) host_ranges = host_ranges || o->prepare >= 0;
  std::array<double, 4> prepare_in_launch{0, 0, 0, 0};
  const std::string build_note = fit_launch(obs, m, rep, m.kernels_per_step, host_ranges ? nullptr : &prepare_in_launch);
  fit_host_around(used, m, rep);
  for (std::size_t k = 0; k < 4; ++k) m.prepare[k] += prepare_in_launch[k];
  m.lag = static_cast<TimeNs>(median(lags));
  m.source = "calibrated from " + trace.source;
  m.notes.clear();
  m.notes.push_back(rep.alignment.empty() ? "engine steps: " + rep.steps_from : rep.alignment);
  m.notes.push_back(std::to_string(used.size()) + " steps with a shape fitted; " + fmt(m.kernels_per_step, 4) + " kernels per step (median)");
  m.notes.push_back("gpu = " + fmt(m.gpu[0] / 1e3) + " us + " + fmt(m.gpu[1]) + " x gemm roofline + " + fmt(m.gpu[2]) + " x attention (" +
                    to_string(m.form) + ") + " + fmt(m.gpu[3]) + " x KV read + " + fmt(m.gpu[4] / 1e3) + " us/seq + " + fmt(m.gpu[5] / 1e3) +
                    " us/token (rms " + fmt(rep.gpu_rms_ns / 1e3) + " us)");
  m.notes.push_back("launch = " + fmt(m.launch[0] / 1e3) + " us (" + fmt(m.launch[0] / 1e3 / std::max(1.0, m.kernels_per_step)) +
                    " us per kernel; rms " + fmt(rep.launch_rms_ns / 1e3) + " us); lag " + fmt(static_cast<double>(m.lag) / 1e3) + " us, tail " +
                    fmt(static_cast<double>(m.tail) / 1e3) + " us");
  m.notes.push_back("prepare = " + fmt(m.prepare[0] / 1e3) + " us + " + fmt(m.prepare[1] / 1e3) + " us/seq + " + fmt(m.prepare[2] / 1e3) +
                    " us/token + " + fmt(m.prepare[3] / 1e3) + " us/KV token; update = " + fmt(m.update[0] / 1e3) + " us + " +
                    fmt(m.update[1] / 1e3) + " us/seq" + (rep.alignment.empty() ? "" : " (from the gaps between steps)"));
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

namespace bneck::serve {

namespace {

// vLLM's and SGLang's step names: the shape, or false.
bool parse_engine_step(const std::string& n, NamedStep& s) {
  long long tok = 0, c = 0, cq = 0, ck = 0, cqq = 0, cqk = 0, g = 0, gq = 0, gk = 0, gqq = 0, gqk = 0;
  StepShape& sh = s.shape;
  if (std::sscanf(n.c_str(), "execute_%lld_context_%lld(sq%lldsk%lldsqsq%lldsqsk%lld)_generation_%lld(sq%lldsk%lldsqsq%lldsqsk%lld)", &tok, &c, &cq, &ck,
                  &cqq, &cqk, &g, &gq, &gk, &gqq, &gqk) == 11) {
    s.engine = "vLLM";
    sh.q = cq + gq, sh.kv = ck + gk, sh.seqs = c + g, sh.qkv_seq = static_cast<double>(cqk + gqk);
  } else if (std::sscanf(n.c_str(), "execute_context_%lld(%lld_%lld)_generation_%lld(%lld)", &c, &cq, &cqq, &g, &gk) == 5) {
    s.engine = "vLLM";
    sh.q = cq + g, sh.kv = cq + gk, sh.seqs = c + g, sh.qkv_seq = static_cast<double>(cqq + gk);
  } else if (std::sscanf(n.c_str(), "step[DECODE bs=%lld]", &g) == 1) {
    s.engine = "SGLang";
    c = 0, sh.q = g, sh.seqs = g;
  } else if (std::sscanf(n.c_str(), "step[EXTEND bs=%lld toks=%lld]", &c, &tok) == 2) {
    s.engine = "SGLang";
    g = 0, sh.q = tok, sh.seqs = c;
  } else {
    return false;
  }
  for (long long v : {tok, c, cq, ck, cqq, cqk, g, gq, gk, gqq, gqk})
    if (v < 0 || v > (1LL << 40)) return false;  // a hostile name: no step
  s.prefills = c;
  s.decodes = g;
  sh.logits = sh.seqs;
  return sh.seqs > 0 && sh.q > 0 && sh.kv >= 0;
}

}  // namespace

NamedSteps read_named_steps(const Trace& trace) {
  NamedSteps out;
  std::vector<std::uint32_t> range_of;
  bool sglang = false;
  for (std::uint32_t i = 0; i < trace.ranges.size(); ++i) {
    const Range& r = trace.ranges[i];
    const std::string& n = trace.strings.str(r.name);
    sglang = sglang || n.rfind("step[", 0) == 0;
    if (n.rfind("capture_", 0) == 0) out.captures.push_back(n);
    NamedStep s;
    std::pair<double, double> key;
    if (parse_engine_step(n, s)) {
    } else if (parse_shape(n, s.shape, key)) {
      s.engine = "bneck serving ranges";
    } else {
      continue;
    }
    s.name = n;
    s.start = r.start;
    s.host_span = r.end - r.start;
    out.steps.push_back(s);
    range_of.push_back(i);
  }
  // SGLang's model runner is instrumented with vLLM's step names too: one step, two names (the
  // execute_ one has the KV length).
  if (sglang) {
    std::vector<NamedStep> kept;
    std::vector<std::uint32_t> kept_ranges;
    for (std::size_t i = 0; i < out.steps.size(); ++i) {
      NamedStep s = out.steps[i];
      if (s.engine == "vLLM") s.engine = "SGLang";
      // Its twin: a kept step of the same shape on the same thread whose range overlaps this one
      // (the ranges come in start order: the last few kept suffice).
      std::size_t twin = kNone;
      for (std::size_t k = kept.size(); k-- > 0 && kept.size() - k <= 4;) {
        const NamedStep& o = kept[k];
        if (o.shape.q == s.shape.q && o.shape.seqs == s.shape.seqs && trace.ranges[kept_ranges[k]].lane == trace.ranges[range_of[i]].lane &&
            s.start < o.start + o.host_span && o.start < s.start + s.host_span) {
          twin = k;
          break;
        }
      }
      if (twin == kNone) {
        kept.push_back(s);
        kept_ranges.push_back(range_of[i]);
      } else if (s.shape.kv > 0) {
        kept[twin].shape = s.shape;
        kept[twin].name = s.name;
      }
    }
    out.steps = std::move(kept);
    range_of = std::move(kept_ranges);
  }
  // Each step's device ops: launched by its thread while its range is open (device ops by their
  // launch's lane and start, searched per range).
  struct Launched {
    LaneId lane;
    TimeNs at;
    OpId op;
    bool operator<(const Launched& o) const { return std::tie(lane, at, op) < std::tie(o.lane, o.at, o.op); }
  };
  std::vector<Launched> launched;
  if (!out.steps.empty())
    for (OpId i = 0; i < trace.ops.size(); ++i) {
      const Op& op = trace.ops[i];
      if (is_device_op(op.kind) && op.link != kNone && op.link < trace.ops.size()) launched.push_back({trace.ops[op.link].lane, trace.ops[op.link].start, i});
    }
  std::sort(launched.begin(), launched.end());
  for (std::size_t i = 0; i < out.steps.size(); ++i) {
    NamedStep& s = out.steps[i];
    const Range& r = trace.ranges[range_of[i]];
    TimeNs first = -1, last = -1;
    std::set<std::uint32_t> apis;
    for (auto it = std::lower_bound(launched.begin(), launched.end(), Launched{r.lane, r.start, 0}); it != launched.end() && it->lane == r.lane && it->at < r.end; ++it) {
      const Op& op = trace.ops[it->op];
      const Op& api = trace.ops[op.link];
      ++s.device_ops;
      s.gpu_busy += op.duration();
      first = first < 0 ? op.start : std::min(first, op.start);
      last = std::max(last, op.end());
      if (apis.insert(op.link).second) {
        const std::string& an = trace.strings.str(api.name);
        if (api.api_class() == ApiClass::GraphLaunch || an.find("GraphLaunch") != std::string::npos)
          ++s.graph_launches;
        else
          ++s.launches;
      }
    }
    s.gpu_span = first < 0 ? 0 : last - first;
    s.mode = s.graph_launches == 0 ? "eager" : s.launches * 10 <= s.device_ops ? "full CUDA graphs" : "piecewise CUDA graphs";
  }
  return out;
}

}  // namespace bneck::serve
