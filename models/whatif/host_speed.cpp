// --host-speed F, and the slowest host of N ranks. Model card: the host's pace as a property of
//   the process that runs it.
//   A host-bound step takes what its host threads take: the CUDA calls and the host time between
//   them (the framework's dispatch, Python). `--host-speed F` runs that host F times as fast (F < 1:
//   slower): every CUDA call's own time (a blocked call's part after its wait) and every host gap
//   between two calls on a thread x 1/F; the device, and the waits it causes, as simulated. For a
//   host other than the traced one, or the traced program run in another process. Given, it is
//   every rank's pace: a layout's slowest host (below) is not applied (`--host-speed 1`: the
//   traced pace on every rank, as with pinned, steady hosts).
//   The same program's host runs at a pace that varies from one process to the next, on one
//   machine, with nothing else running (validate/reference/h200/host, run_host.sh: the 48-layer
//   loop at batch 1 in 5 processes one after another 1.95 / 1.99 / 2.88 / 3.50 / 2.21 ms, BERT-large
//   8x512 under autocast 25.4 / 15.3 / 15.6 / 15.5 / 15.3 ms of host time a step, an hour later
//   33.3 / 29.0 / 17.7 ms), within a process
//   from one stretch of steps to the next (2.2 ms for 250 steps, then 3.4 ms for 35), and as much
//   when processes run side by side (2, 4 and 8 at once: 2.1-3.7 ms). Each program's process
//   medians over their median are the draws below (HostSpread::ratios: 96 processes of 24 program
//   runs, 2026-12-01 .. 12-03; log-sd 0.22). A step on N ranks waits for its slowest host: a
//   layout forecast of N ranks from a trace of K (data, FSDP, tensor, pipeline, context, expert
//   parallel, --ranks) runs the host at 1 / (E[max of N draws] / E[max of K draws]): x1.12 for 2
//   ranks from 1, x1.26 for 4, x1.41 for 8 (expected_slowest). Its interval: the 10th and 90th
//   percentiles of the max of N over its mean (slowest_spread).
//   Not modelled: which host thread (main, autograd, NCCL's) a slow pace hits; pinning; other
//   machines' hosts (a trace from another machine carries its own pace).
#include <algorithm>
#include <cmath>

#include "models/whatif/transform.hpp"
#include "sim/base/error.hpp"
#include "sim/base/units.hpp"

namespace bneck {

namespace {

// Per-process median host step time (ms) of one program run, unprofiled; each list one program on
// one machine.
// validate/reference/h200/host/host.log (2026-12-03), host_spread.py issue times:
const std::vector<std::vector<double>>& process_medians() {
  static const std::vector<std::vector<double>> m = {
      {1.949, 1.987, 2.876, 3.502, 2.208},  // 48-layer loop fp32, one process after another
      {3.568, 3.673, 2.350, 2.180, 2.148, 2.122, 2.527, 2.564, 2.920, 3.289, 2.506, 3.395, 3.571, 3.149},  // side by side (2, 4, 8)
      {3.562, 3.452, 3.515, 6.510},                                                                        // 48-layer loop autocast
      {5.358, 4.675, 4.415, 7.292},                                                                        // BERT-base 1x128 fp32
      {6.470, 8.625, 6.627, 8.782},                                                                        // BERT-base 1x128 autocast
      {25.428, 15.296, 15.595, 15.496, 15.269},  // BERT-large 8x512 autocast (host-bound), host time a step
      // validate/reference/h200/loops (2026-12-02), loops.py --loop host, CUDA-event step medians:
      {4.768, 2.031, 2.630},  // fp32
      {4.772, 2.023, 2.943},  // tf32
      {8.414, 3.458, 3.880},  // autocast
      // validate/reference/h200/profiler_overhead/more (2026-12-02), plain runs, host step medians:
      {1.988, 1.983, 1.869},     // MLP
      {10.024, 8.457, 6.931},    // GPT-2 small inference
      {29.128, 34.810, 27.498},  // GPT-2 small training
      // validate/reference/h200/host/host2.log (2026-12-03, run_host2.sh), host_spread.py issue times
      // where the host sets the step (wall times of the training steps):
      {4.424, 2.243, 3.458},                                            // 48-layer loop fp32
      {2.452, 2.889, 3.523},                                            // tf32
      {7.120, 4.904, 4.694},                                            // autocast
      {9.695, 6.406, 9.575},                                            // BERT-base 1x128 fp32
      {9.797, 6.117, 8.819},                                            // tf32
      {15.423, 9.843, 11.927},                                          // autocast
      {40.910, 31.458, 30.390},                                         // GPT-2 small training (wall)
      {5.147, 4.132, 4.739},                                            // DDP fp32 on one rank, 12 x Linear(4096)
      {33.259, 28.973, 17.686},                                         // BERT-large 8x512 autocast
      {23.546, 16.642, 18.668},                                         // GPT-2 medium 4x512 tf32
      {30.972, 21.254, 23.613},                                         // autocast
      {2.242, 2.358, 2.365, 3.392, 2.591, 3.400, 2.376, 2.612, 2.592},  // 48-layer loop alone, two at once (3 rounds)
  };
  return m;
}

}  // namespace

const std::vector<double>& HostSpread::ratios() {
  static const std::vector<double> r = [] {
    std::vector<double> out;
    for (const auto& v : process_medians()) {
      std::vector<double> s = v;
      std::sort(s.begin(), s.end());
      const std::size_t n = s.size();
      const double med = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
      for (double x : v) out.push_back(x / med);
    }
    std::sort(out.begin(), out.end());
    return out;
  }();
  return r;
}

namespace {
// The distribution of the max of n draws from the sorted sample r: P(max <= r_i) = ((i + 1) / m)^n.
double max_cdf(std::size_t i, std::size_t m, double n) { return std::pow(static_cast<double>(i + 1) / static_cast<double>(m), n); }
}  // namespace

double HostSpread::expected_max(double n) { return expected_max(n, ratios()); }

double HostSpread::expected_max(double n, const std::vector<double>& r) {
  const std::size_t m = r.size();
  double e = 0, prev = 0;
  for (std::size_t i = 0; i < m; ++i) {
    const double c = max_cdf(i, m, std::max(1.0, n));
    e += r[i] * (c - prev);
    prev = c;
  }
  return e;
}

double HostSpread::expected_slowest(double n, double k) { return expected_max(n) / expected_max(std::max(1.0, k)); }

std::pair<double, double> HostSpread::slowest_spread(double n) {
  const std::vector<double>& r = ratios();
  const std::size_t m = r.size();
  const double mean = expected_max(n);
  double lo = r.front(), hi = r.back();
  bool have_lo = false;
  for (std::size_t i = 0; i < m; ++i) {
    const double c = max_cdf(i, m, std::max(1.0, n));
    if (!have_lo && c >= 0.1) lo = r[i], have_lo = true;
    if (c >= 0.9) {
      hi = r[i];
      break;
    }
  }
  return {lo / mean, hi / mean};
}

void scale_host_work(const Trace& t, WhatIfCase& c, double factor) {
  if (factor <= 0 || factor == 1) return;
  for (OpId i = 0; i < t.ops.size() && i < c.durations.size(); ++i)
    if (t.ops[i].kind == OpKind::Api) c.durations[i] = static_cast<TimeNs>(std::llround(static_cast<double>(c.durations[i]) * factor));
  Graph& g = c.edit_graph();
  for (auto e : boost::make_iterator_range(boost::edges(g.csr)))
    if (g.csr[e].type() == EdgeType::HostOrder)
      g.csr[e].set_delay(static_cast<TimeNs>(std::llround(static_cast<double>(g.csr[e].delay()) * factor)));
}

std::uint32_t traced_ranks(const Trace& t) {
  std::vector<std::uint32_t> seen;
  for (const Op& o : t.ops)
    if (o.kind != OpKind::Api) {
      const std::uint32_t r = t.rank_of(o);
      if (std::find(seen.begin(), seen.end(), r) == seen.end()) seen.push_back(r);
    }
  return std::max<std::uint32_t>(1, static_cast<std::uint32_t>(seen.size()));
}

void slowest_host_of_ranks(const Trace& t, WhatIfCase& c) {
  const double k = traced_ranks(t), n = c.layout_ranks;
  if (n <= k || c.host_pace_given) return;
  const double f = HostSpread::expected_slowest(n, k);
  scale_host_work(t, c, f);
  c.host_ranks = n;
  c.log.push_back("a step of " + fmt_num("%.0f", n) + " ranks waits for its slowest host: host work x" + fmt_num("%.3f", f) +
                  " (the expected slowest of " + fmt_num("%.0f", n) + " processes' paces over " + fmt_num("%.0f", k) +
                  "'s, measured between processes)");
}

namespace {

class HostSpeed : public TransformStep {
 public:
  explicit HostSpeed(double f) : f_(f) {}
  bool needs_gpu_rates() const override { return false; }
  void apply(const WhatIfContext& ctx, WhatIfCase& c) const override {
    scale_host_work(ctx.trace, c, 1 / f_);
    c.host_pace_given = true;
    c.log.push_back(text + ": the host " + fmt_num("%.3g", f_) +
                    "x as fast: every CUDA call's own time and every host gap between calls x" + fmt_num("%.3g", 1 / f_));
  }

 private:
  double f_;
};

std::unique_ptr<TransformStep> parse(const std::string& arg) {
  try {
    std::size_t used = 0;
    const double f = std::stod(arg, &used);
    if (used == arg.size() && f >= 0.01 && f <= 100) return std::make_unique<HostSpeed>(f);
  } catch (const std::exception&) {}
  throw InputError("--host-speed " + arg + ": expected the host's speed as a factor of the traced one (0.01 .. 100; 2 = twice as fast)");
}

}  // namespace

extern const TransformDef kHostSpeedTransform{
    "host-speed", "F", TransformDef::Arg::Required,
    "the host F times as fast as the traced one (CUDA calls and the host time between them / F; another machine or process)", parse};

}  // namespace bneck
