// Calibration from a plain profile (no step ranges): the engine's steps found from its device-to-host
// copies or by structure recognition, and the request log of the traced run aligned with them (the
// scheduler replayed over the steps gives each its batch).
#include <algorithm>
#include <limits>
#include <map>

#include "models/serving/calibrate_steps.hpp"
#include "sim/analysis/ranges.hpp"
#include "sim/analysis/structure.hpp"
#include "sim/base/error.hpp"
#include "sim/base/stats.hpp"

namespace bneck::serve::calibration {

namespace {

// The host's pause before step k, since the previous step's end (0 for the first).
double gap_before(const std::vector<StepObs>& steps, std::size_t k) {
  return k == 0 ? 0.0 : static_cast<double>(std::max<TimeNs>(0, steps[k].start - steps[k - 1].end));
}

// The median host pause between consecutive steps.
double median_gap(const std::vector<StepObs>& steps) {
  std::vector<double> gaps;
  for (std::size_t k = 1; k < steps.size(); ++k) gaps.push_back(gap_before(steps, k));
  return median(gaps);
}

// A device-to-host copy: a step's tokens on their way out (its call returns when the GPU is done).
bool is_d2h(const Trace& trace, const Op& op) {
  const CopyInfo* c = trace.copy(op);
  return op.kind == OpKind::Memcpy && c && c->copy_kind == MemcpyKind::DtoH;
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

}  // namespace

// The steps of an engine from a plain profile. A step ends when its sampled tokens reach the host:
// one device-to-host copy a step, which the host waits for. So on the thread that launches most
// device ops, the steps are its launches up to each such copy, when these segments are about as
// long as a loop structure recognition finds (their median at least half its instances' median op
// count: one copy a step), or are once a segment of under 10 % of an instance's ops is joined to
// the step before it (a second copy a step: model.generate's stopping criteria); else the
// iterations themselves (alike, not equal: the batch changes the kernels). The loop is the
// iterations, or the loop inside them where the iterations are under 8 or over 4 times the
// segments (a warm-up served twice repeats as a whole: two iterations of many steps each).
std::vector<StepObs> engine_steps(const Trace& trace, std::string& how) {
  const Structure st = find_structure(trace);
  const StructureLevel* iterations = st.level("iteration");
  const StructureLevel* inner = st.level("layer");
  if (iterations && iterations->instances.size() < 8) iterations = nullptr;
  if (inner && inner->instances.size() < 8) inner = nullptr;
  if (!iterations && !inner) {
    how = "structure recognition found no repeating step";
    return {};
  }
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
  std::stable_sort(seq.begin(), seq.end(),
                   [&](OpId x, OpId y) { return trace.ops[trace.ops[x].link].start < trace.ops[trace.ops[y].link].start; });
  struct Seg {
    std::vector<OpId> ops;
  };
  std::vector<Seg> raw(1);
  for (OpId i : seq) {
    raw.back().ops.push_back(i);
    if (is_d2h(trace, trace.ops[i])) raw.emplace_back();
  }
  raw.pop_back();  // launches after the last copy: no step's end
  auto median_size = [](const auto& gs) {
    std::vector<double> n;
    for (const auto& g : gs) n.push_back(static_cast<double>(g.ops.size()));
    return n.empty() ? 0.0 : median(n);
  };
  // The loop inside the iterations only where these are too few or far longer than the segments
  // (the layers of a model inside its steps are not steps).
  std::vector<const StructureLevel*> loops;
  if (iterations) loops.push_back(iterations);
  if (inner && (!iterations || median_size(iterations->instances) > 4 * median_size(raw))) loops.push_back(inner);
  for (const StructureLevel* it : loops) {
    const double loop_ops = median_size(it->instances);
    std::vector<Seg> segs = raw;
    double seg_ops = median_size(segs);
    std::string copies = "one device-to-host copy a step (its tokens)";
    if (!(segs.size() >= 8 && seg_ops >= 0.5 * loop_ops)) {
      // Copies after the forward's (model.generate: its stopping criteria read a flag back): a
      // segment of under 10 % of a step's ops belongs to the step before it.
      std::vector<Seg> joined;
      for (auto& g : segs)
        if (!joined.empty() && static_cast<double>(g.ops.size()) < 0.1 * loop_ops)
          joined.back().ops.insert(joined.back().ops.end(), g.ops.begin(), g.ops.end());
        else
          joined.push_back(std::move(g));
      segs = std::move(joined);
      seg_ops = median_size(segs);
      copies = "device-to-host copies, a step's last one ending it (segments of under 10 % of a step's ops joined to the step before)";
    }
    if (segs.size() >= 8 && seg_ops >= 0.5 * loop_ops) {
      how = copies + ": " + std::to_string(segs.size()) + " steps of " + fmt(seg_ops, 4) +
            " device ops (median); structure recognition: " + it->how;
      std::vector<StepObs> obs;
      for (const auto& g : segs) obs.push_back(step_of_ops(trace, g.ops));
      std::erase_if(obs, [](const StepObs& o) { return o.launches.empty(); });
      return obs;
    }
  }
  if (!iterations) {
    how = "structure recognition found no repeating step (its loop inside the iterations does not match the device-to-host copies)";
    return {};
  }
  how = "structure recognition: " + iterations->how;
  std::vector<StepObs> obs;
  for (const auto& in : iterations->instances) obs.push_back(step_of_ops(trace, in.ops));
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
    throw InputError(tl.path, "aligning the log with the engine steps of " + trace_path +
                                  " needs token times (token_times_s, or a vllm bench result's itls) and 8 steps; found " +
                                  std::to_string(tokens.size()) + " token times, " + std::to_string(steps.size()) + " steps");
  std::sort(tokens.begin(), tokens.end());
  const std::size_t n = steps.size();
  std::vector<TimeNs> ends(n);
  for (std::size_t k = 0; k < n; ++k) ends[k] = steps[k].end;
  const double gap_med = median_gap(steps);
  const TimeNs tol = static_cast<TimeNs>(std::max(20e3, 0.25 * gap_med));
  // The step a token (on the trace's clock) comes out after, or -1 when it falls inside a step.
  auto step_of = [&](TimeNs x) -> std::ptrdiff_t {
    const std::ptrdiff_t k = std::upper_bound(ends.begin(), ends.end(), x + tol) - ends.begin() - 1;
    if (k < 0) return -1;
    const TimeNs next = k + 1 < static_cast<std::ptrdiff_t>(n) ? steps[static_cast<std::size_t>(k) + 1].start
                                                               : ends[static_cast<std::size_t>(k)] + static_cast<TimeNs>(4 * gap_med);
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
    throw InputError(tl.path, "cannot align the log with " + trace_path + ": " + std::to_string(n) + " engine steps found, " +
                                  std::to_string(k1 - k0) +
                                  " of them between the log's first arrival and last token; is it the log of the traced run?");
  // Scheduling times: after the previous step's last token out (its update), before this step's first launch.
  std::vector<TimeNs> last_token(n, std::numeric_limits<TimeNs>::min());
  for (TimeNs t : tokens)
    if (std::ptrdiff_t k = step_of(t - offset); k >= 0)
      last_token[static_cast<std::size_t>(k)] = std::max(last_token[static_cast<std::size_t>(k)], t);
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
  rep.alignment = std::to_string(n) + " engine steps found (" + rep.steps_from + "); " + tl.path + " aligned at " +
                  fmt(static_cast<double>(offset) / 1e9, 6) + " s: " + std::to_string(k1 - k0) + " steps from its first arrival (" +
                  std::to_string(k0) + " before: not its requests), the scheduler fills " + std::to_string(rep.steps_scheduled) + "; " +
                  std::to_string(agree) + " of " + std::to_string(total) + " tokens (" + fmt(100 * share) +
                  " %) come out on the step the scheduler gives them";
  bool shared = false;  // a log with shared prefixes, replayed without the prefix cache
  for (const auto& q : *tl.requests) shared = shared || !q.hash_ids.empty();
  shared = shared && !tl.engine.prefix_caching;
  if (share < 0.9)
    throw InputError(tl.path, "disagrees with " + trace_path + ": " + std::to_string(agree) + "/" + std::to_string(total) +
                                  " tokens on their steps (" + std::to_string(n) + " steps, " + std::to_string(k1 - k0) +
                                  " after its first arrival); " + (shared ? std::string("--prefix-caching? ") : std::string()) +
                                  "the log of the traced run, or --max-batch-tokens --max-seqs --chunked-prefill --num-blocks?");
}

// A static-batching engine's log aligned with the steps found. The log's batches are its requests
// that finished together (static_batches); batch g of b sequences, padded to its longest prompt
// lmax and run for its longest output omax, is omax steps: a prefill and omax - 1 decodes. From the
// last step found backwards, each batch's first step is the one within a few steps of where its
// step count puts it that most stands out as a batch's start: the longest host pause before it or
// the largest GPU time (its prefill), against the median step's. A batch agrees when its steps
// number omax (one less or more allowed: a step's segment can merge or split) and, after the first,
// its duration (from the previous batch's last step's end to its own) is within 5 % of the log's
// (finish to finish); the first batch's steps span its last arrival to its finish, less at most
// 15 % (its setup). The shapes go to each batch's steps in order.
void align_static_log(std::vector<StepObs>& steps, const TraceLog& tl, const std::string& trace_path, CalibrationReport& rep) {
  const std::vector<Request>& log = *tl.requests;
  const auto batches = static_batches(log);
  const std::size_t n = steps.size();
  if (batches.empty() || n < 8)
    throw InputError(tl.path, "aligning a static-batching log with the engine steps of " + trace_path +
                                  " needs finish times (finish_s) and 8 steps; found " + std::to_string(batches.size()) + " batches, " +
                                  std::to_string(n) + " steps");
  std::vector<double> gpus;
  for (const auto& o : steps) gpus.push_back(static_cast<double>(o.gpu));
  const double gap_med = std::max(1.0, median_gap(steps)), gpu_med = std::max(1.0, median(gpus));
  auto score = [&](std::size_t k) { return std::max(gap_before(steps, k) / gap_med, static_cast<double>(steps[k].gpu) / gpu_med); };
  struct Batch {
    std::int64_t b = 0, lmax = 0, omax = 0;
    TimeNs finish = 0, arrived = 0;  // its last request's arrival
    std::size_t first = 0, end = 0;  // its steps in the trace: [first, end)
    std::int64_t tokens = 0;
  };
  std::vector<Batch> bs;
  std::int64_t implied = 0, tokens = 0;
  for (const auto& g : batches) {
    Batch x;
    x.b = static_cast<std::int64_t>(g.size());
    for (std::size_t i : g) {
      x.lmax = std::max(x.lmax, log[i].prompt);
      x.omax = std::max(x.omax, log[i].output);
      x.finish = std::max(x.finish, log[i].measured_finish);
      x.arrived = std::max(x.arrived, log[i].arrival);
      x.tokens += log[i].output;
    }
    implied += x.omax;
    tokens += x.tokens;
    bs.push_back(x);
  }
  std::size_t pos = n;
  bool fits = true;
  for (std::size_t g = bs.size(); g-- > 0;) {
    Batch& x = bs[g];
    const auto omax = static_cast<std::size_t>(x.omax);
    if (omax < 1 || pos < omax) {
      fits = false;
      break;
    }
    const std::size_t w = std::max<std::size_t>(2, omax / 20), p = pos - omax;
    std::size_t best = p;
    for (std::size_t k = p >= w ? p - w : 0; k <= std::min(p + w, pos - 1); ++k)
      if (score(k) > score(best)) best = k;
    x.first = best;
    x.end = pos;
    pos = best;
  }
  const TimeNs offset = bs.back().finish - steps[n - 1].end;  // log clock = trace clock + offset
  std::int64_t agreeing = 0;
  std::size_t agree_batches = 0;
  for (std::size_t g = 0; fits && g < bs.size(); ++g) {
    Batch& x = bs[g];
    const auto got = static_cast<std::int64_t>(x.end - x.first);
    bool ok = std::abs(got - x.omax) <= 1;
    if (ok && g > 0) {
      const double traced = static_cast<double>(steps[x.end - 1].end - steps[bs[g - 1].end - 1].end);
      const double logged = static_cast<double>(x.finish - bs[g - 1].finish);
      ok = logged > 0 && std::abs(traced / logged - 1) < 0.05;
    } else if (ok) {
      // The first batch: from its first step to its last within the time from its last request's
      // arrival to its finish, less at most 15 % (the batch's setup before its first step).
      const double traced = static_cast<double>(steps[x.end - 1].end - steps[x.first].start);
      const double logged = static_cast<double>(x.finish - x.arrived);
      ok = logged > 0 && traced <= 1.05 * logged && traced >= 0.85 * logged;
    }
    agreeing += ok ? x.tokens : 0;
    agree_batches += ok ? 1 : 0;
    for (std::size_t k = x.first; k < x.end && static_cast<std::int64_t>(k - x.first) < x.omax; ++k) {
      StepObs& o = steps[k];
      o.shaped = true;
      o.shape = static_step_shape(x.b, x.lmax, static_cast<std::int64_t>(k - x.first));
      o.key = {static_cast<double>(o.shape.q), static_cast<double>(o.shape.kv)};
      if (k > x.first && static_cast<double>(o.start - steps[k - 1].end) < 4 * gap_med) {
        o.gap = o.start - steps[k - 1].end;
        o.prev_seqs = x.b;
      }
    }
  }
  rep.steps_found = n;
  rep.steps_in_log = fits ? n - bs.front().first : 0;
  rep.steps_scheduled = static_cast<std::size_t>(implied);
  rep.tokens = static_cast<std::size_t>(tokens);
  rep.tokens_agreeing = static_cast<std::size_t>(agreeing);
  rep.log_offset_ns = offset;
  const double share = tokens ? static_cast<double>(agreeing) / static_cast<double>(tokens) : 0;
  const std::string batches_line =
      std::to_string(bs.size()) + " static batches (requests finished together) imply " + std::to_string(implied) + " steps";
  if (!fits || share < 0.9)
    throw InputError(tl.path, "disagrees with " + trace_path + ": its " + batches_line + ", " + std::to_string(n) + " found; " +
                                  std::to_string(agree_batches) + " of " + std::to_string(bs.size()) +
                                  " batches agree; give the log of the traced run");
  const std::string found = std::to_string(n) + " engine steps found (" + rep.steps_from + "); " + tl.path + ": " + batches_line;
  rep.alignment = found + "; the last " + std::to_string(rep.steps_in_log) + " steps are its batches, " + std::to_string(agree_batches) +
                  " of " + std::to_string(bs.size()) + " agreeing in step count and duration (" + fmt(100 * share) + " % of its tokens)";
}

}  // namespace bneck::serve::calibration
