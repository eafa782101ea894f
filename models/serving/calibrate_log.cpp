// The host's work per engine step as a function of the batch, from a request log's token times
// (calibrate.hpp, fit_host_steps).
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "models/serving/calibrate.hpp"
#include "models/serving/calibrate_steps.hpp"
#include "models/whatif/transform.hpp"
#include "sim/base/stats.hpp"

namespace bneck::serve {

using calibration::fmt;

// Steps in a stretch of the host's pace: about a second of a Python engine's decode steps (55-80
// ms; the pace switches seen in validate/reference/h200/serving/loads4 held for seconds).
constexpr std::size_t kPaceWindow = 15;

namespace {

// Relative spread of a sample: its standard deviation over its mean (0 for an empty or zero sample).
double spread(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  double s = 0, s2 = 0;
  for (double x : v) s += x, s2 += x * x;
  const double n = static_cast<double>(v.size()), mean = s / n;
  return mean > 0 ? std::sqrt(std::max(0.0, s2 / n - mean * mean)) / mean : 0;
}

}  // namespace

std::vector<LogStep> log_steps(const std::vector<Request>& reqs) {
  std::vector<TimeNs> tokens;
  for (const auto& r : reqs) tokens.insert(tokens.end(), r.token_times.begin(), r.token_times.end());
  std::sort(tokens.begin(), tokens.end());
  auto group = [&](TimeNs tol) {
    std::vector<TimeNs> emit;
    for (std::size_t i = 0; i < tokens.size(); ++i)
      if (i + 1 == tokens.size() || tokens[i + 1] - tokens[i] > tol) emit.push_back(tokens[i]);
    return emit;
  };
  // One step's tokens are written out together (well under a millisecond apart); steps are further
  // apart. Where steps are short (a fast engine), a quarter of their median spacing.
  TimeNs tol = 1'000'000;
  std::vector<TimeNs> emit = group(tol);
  if (emit.size() > 2) {
    std::vector<double> gaps;
    for (std::size_t k = 1; k < emit.size(); ++k) gaps.push_back(static_cast<double>(emit[k] - emit[k - 1]));
    if (const double q = 0.25 * quantile(gaps, 0.5); q < static_cast<double>(tol))
      emit = group(tol = std::max<TimeNs>(1, static_cast<TimeNs>(q)));
  }
  // Requests in flight: arrived, their last token not yet out.
  std::vector<TimeNs> arrivals, finishes;
  for (const auto& r : reqs)
    if (!r.token_times.empty()) arrivals.push_back(r.arrival), finishes.push_back(r.token_times.back());
  std::sort(arrivals.begin(), arrivals.end());
  std::sort(finishes.begin(), finishes.end());
  auto in_flight = [&](TimeNs t) {
    const auto a = std::upper_bound(arrivals.begin(), arrivals.end(), t) - arrivals.begin();
    const auto f = std::upper_bound(finishes.begin(), finishes.end(), t + tol) - finishes.begin();
    return a - f;
  };
  std::vector<LogStep> out;
  for (std::size_t k = 0; k < emit.size(); ++k) {
    LogStep s;
    s.emit = emit[k];
    const TimeNs prev = k ? emit[k - 1] : std::numeric_limits<TimeNs>::min();
    s.busy = k > 0 && in_flight(prev) > 0;
    if (s.busy) {
      s.sched = prev;
    } else {  // the engine was idle: it woke on the next arrival
      const auto it = std::upper_bound(arrivals.begin(), arrivals.end(), k ? prev : std::numeric_limits<TimeNs>::min());
      s.sched = it != arrivals.end() && *it < s.emit ? *it : (k ? prev : s.emit);
    }
    out.push_back(s);
  }
  return out;
}

bool fit_host_steps(const std::vector<Request>& reqs, const EngineConfig& eng, StepCostModel& m, HostStepFit& fit) {
  fit = HostStepFit{};
  if (eng.cuda_graph || eng.policy != Policy::Continuous) {
    fit.note = "the host's work per step from the log's steps: an eager continuous engine's log only";
    return false;
  }
  const std::vector<LogStep> ls = log_steps(reqs);
  if (ls.size() < 16) {
    fit.note = "the host's work per step from the log's steps: " + std::to_string(ls.size()) + " steps found, 16 needed";
    return false;
  }
  std::vector<MeasuredStep> ms;
  for (const auto& s : ls) ms.push_back({s.sched, s.emit});
  const ServeResult r = replay_schedule(reqs, eng, ms);
  // Agreement: each token on the step the scheduler gives it (the replay emits at the steps' times).
  std::vector<TimeNs> emits;
  for (const auto& s : ls) emits.push_back(s.emit);
  auto step_of = [&](TimeNs t) { return std::lower_bound(emits.begin(), emits.end(), t) - emits.begin(); };
  std::size_t agree = 0, total = 0;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    const auto& meas = reqs[i].token_times;
    const auto& sim = r.requests[i].token_times;
    total += meas.size();
    for (std::size_t j = 0; j < meas.size() && j < sim.size(); ++j) agree += step_of(meas[j]) == step_of(sim[j]) ? 1 : 0;
  }
  fit.steps = ls.size();
  fit.agreement = total ? static_cast<double>(agree) / static_cast<double>(total) : 0;
  if (fit.agreement < 0.9) {
    fit.note = "the host's work per step from the log's steps: " + std::to_string(ls.size()) + " steps, but only " +
               fmt(100 * fit.agreement) + " % of the tokens come out on the step the scheduler gives them (90 % needed): slopes not fitted";
    return false;
  }
  // The steps the engine ran back to back (a request in flight when the previous one ended): each
  // lasts from the previous step's tokens to its own. Their time with the fitted trace model at
  // host scale 1 and no per-sequence or per-token launch work, split into the host's part
  // (prepare, launch, plan build, update) and the rest (tail; a GPU-bound forward is left out:
  // its time does not tell the host's).
  StepCostModel base = m;
  base.host_scale = 1;
  base.host_var_ratio = 1;
  base.launch[1] = base.launch[2] = 0;  // (a forecast's assumed per-sequence work is what this measures)
  std::set<ShapeKey> met;
  std::vector<std::vector<double>> rows;
  std::vector<double> y, qs, seqs;
  for (std::size_t k = 0; k < ls.size() && k < r.steps.size(); ++k) {
    const StepShape& sh = r.steps[k].shape;
    if (sh.seqs == 0) continue;
    const bool fresh = base.shape_build > 0 && met.emplace(sh.batched ? sh.seqs : 0, sh.q, sh.kv).second;
    if (!ls[k].busy || k == 0 || r.steps[k - 1].shape.seqs == 0) continue;
    const StepTime t = base.time(sh, false, fresh);
    if (!t.host_bound) continue;  // GPU-bound
    const double launch = static_cast<double>(t.forward - t.build - base.tail);
    const double host = static_cast<double>(t.prepare + t.update + t.build) + launch;
    rows.push_back({host, static_cast<double>(sh.q), static_cast<double>(sh.seqs)});
    y.push_back(static_cast<double>(ls[k].emit - ls[k - 1].emit - base.tail));
    qs.push_back(static_cast<double>(sh.q));
    seqs.push_back(static_cast<double>(sh.seqs));
  }
  fit.used = rows.size();
  fit.q_spread = spread(qs);
  fit.seq_spread = spread(seqs);
  fit.q_lo = qs.empty() ? 0 : *std::min_element(qs.begin(), qs.end());
  fit.q_hi = qs.empty() ? 0 : *std::max_element(qs.begin(), qs.end());
  fit.seq_lo = seqs.empty() ? 0 : *std::min_element(seqs.begin(), seqs.end());
  fit.seq_hi = seqs.empty() ? 0 : *std::max_element(seqs.begin(), seqs.end());
  if (rows.size() < 16) {
    fit.note =
        "the host's work per step from the log's steps: " + std::to_string(rows.size()) + " back-to-back host-bound steps, 16 needed";
    return false;
  }
  // A slope the log's batches do not vary enough to tell (spread under 10 %) is not fitted.
  const bool by_q = fit.q_spread >= 0.1, by_seq = fit.seq_spread >= 0.1;
  std::vector<std::vector<double>> a;
  for (const auto& row : rows) {
    std::vector<double> x{row[0]};
    if (by_q) x.push_back(row[1]);
    if (by_seq) x.push_back(row[2]);
    a.push_back(x);
  }
  double rms = 0;
  const std::vector<double> c = robust_nnls(a, y, &rms);
  if (c[0] <= 0) {
    fit.note = "the host's work per step from the log's steps: no positive host scale fits";
    return false;
  }
  fit.scale = c[0];
  fit.per_token_ns = by_q ? c[1] / c[0] : 0;
  fit.per_seq_ns = by_seq ? c[by_q ? 2 : 1] / c[0] : 0;
  fit.q_fitted = by_q;
  fit.seq_fitted = by_seq;
  // How well the fitted model tells each step's time: the median |log error| over the steps used.
  m.host_scale = fit.scale;
  m.launch[1] = fit.per_seq_ns;  // the fitted slopes in place of any assumed ones, as `base` above
  m.launch[2] = fit.per_token_ns;
  std::vector<double> err, signed_err;
  met.clear();
  for (std::size_t k = 0; k < ls.size() && k < r.steps.size(); ++k) {
    const StepShape& sh = r.steps[k].shape;
    if (sh.seqs == 0) continue;
    const bool fresh = m.shape_build > 0 && met.emplace(sh.batched ? sh.seqs : 0, sh.q, sh.kv).second;
    if (!ls[k].busy || k == 0 || r.steps[k - 1].shape.seqs == 0) continue;
    const double d = static_cast<double>(ls[k].emit - ls[k - 1].emit);
    const StepTime t = m.time(sh, false, fresh);
    const double model = static_cast<double>(t.total());
    if (d <= 0 || model <= 0) continue;
    err.push_back(std::abs(std::log(model / d)));
    // The pace sample: host-bound steps only (a GPU-bound forward's time tells the GPU model's error).
    if (t.host_bound) signed_err.push_back(std::log(d / model));
  }
  fit.median_abs_log_error = quantile(err, 0.5);
  // The host's pace through the run: the host-bound back-to-back steps' measured time over the
  // fitted model's, its median over stretches of kPaceWindow consecutive such steps (a step's own
  // noise averaged out, a stretch at another pace kept), and where those medians lie around the
  // run's. (Whatever else drifts through the run, a misfit that grows with the batch, counts too.)
  if (signed_err.size() >= 2 * kPaceWindow) {
    std::vector<double> windowed;
    for (std::size_t k = 0; k + kPaceWindow <= signed_err.size(); ++k)
      windowed.push_back(quantile(
          std::vector<double>(signed_err.begin() + static_cast<long>(k), signed_err.begin() + static_cast<long>(k + kPaceWindow)), 0.5));
    const double mid = quantile(signed_err, 0.5);
    fit.pace_lo = std::exp(quantile(windowed, 0.1) - mid) - 1;
    fit.pace_hi = std::exp(quantile(windowed, 0.9) - mid) - 1;
  }
  fit.note = "host work per step measured on " + std::to_string(rows.size()) + " back-to-back steps of the log (" +
             std::to_string(ls.size()) + " steps from its token times, " + fmt(100 * fit.agreement) +
             " % of the tokens on the replayed step; query tokens " + fmt(fit.q_lo) + ".." + fmt(fit.q_hi) + ", sequences " +
             fmt(fit.seq_lo) + ".." + fmt(fit.seq_hi) + "): host terms x " + fmt(fit.scale) + ", launch + " +
             (by_q ? fmt(fit.per_token_ns / 1e3) + " us/token" : std::string("(per token: not seen to vary)")) + " + " +
             (by_seq ? fmt(fit.per_seq_ns / 1e3) + " us/seq" : std::string("(per sequence: not seen to vary)")) + "; median step error " +
             fmt(100 * (std::exp(fit.median_abs_log_error) - 1)) + " %" +
             (fit.pace_lo < 0 || fit.pace_hi > 0
                  ? "; the host's pace over stretches of " + std::to_string(kPaceWindow) + " steps " + fmt_num("%+.3g", 100 * fit.pace_lo) +
                        " .. " + fmt_num("%+.3g", 100 * fit.pace_hi) + " % of the run's"
                  : std::string());
  return true;
}

}  // namespace bneck::serve
