// LLM serving: latency and throughput metrics of simulated and measured runs.
#include "models/serving/serve.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sim/base/stats.hpp"

namespace bneck::serve {

namespace {

Metrics::Stat stat(const std::vector<double>& v) {
  Metrics::Stat s;
  if (v.empty()) return s;
  double sum = 0;
  for (double x : v) sum += x;
  s.n = v.size();
  s.mean = sum / static_cast<double>(v.size());
  s.median = quantile(v, 0.5);
  s.p99 = quantile(v, 0.99);
  return s;
}

// Metrics from, per request, its arrival, scheduling time (or -1), token times and finish.
Metrics metrics(const std::vector<Request>& reqs, const std::vector<const std::vector<TimeNs>*>& tokens, const std::vector<TimeNs>& finish,
                const std::vector<TimeNs>& scheduled, const Slo& slo) {
  Metrics m;
  std::vector<double> ttft, tpot, itl, e2el;
  TimeNs first = std::numeric_limits<TimeNs>::max(), last = 0;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::int64_t good = 0;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    const auto& tt = *tokens[i];
    first = std::min(first, reqs[i].arrival);
    if (tt.empty() && finish[i] >= 0) {  // finish only: throughput and E2E latency
      ++m.completed;
      m.total_output += reqs[i].output;
      last = std::max(last, finish[i]);
      const double e = static_cast<double>(finish[i] - reqs[i].arrival) / 1e6;
      e2el.push_back(e);
      m.req_ttft.push_back(nan), m.req_tpot.push_back(nan), m.req_e2el.push_back(e), m.req_queue.push_back(nan);
      if (slo.ttft <= 0 && slo.tpot <= 0) ++good;
      continue;
    }
    if (tt.empty() || finish[i] < 0) {
      m.req_ttft.push_back(nan), m.req_tpot.push_back(nan), m.req_e2el.push_back(nan), m.req_queue.push_back(nan);
      continue;
    }
    ++m.completed;
    m.total_output += static_cast<std::int64_t>(tt.size());
    last = std::max(last, finish[i]);
    const double a = static_cast<double>(tt.front() - reqs[i].arrival) / 1e6;
    const double e = static_cast<double>(finish[i] - reqs[i].arrival) / 1e6;
    double p = nan;
    if (tt.size() > 1) {
      p = static_cast<double>(finish[i] - tt.front()) / 1e6 / static_cast<double>(tt.size() - 1);
      tpot.push_back(p);
      for (std::size_t k = 1; k < tt.size(); ++k) itl.push_back(static_cast<double>(tt[k] - tt[k - 1]) / 1e6);
    }
    ttft.push_back(a);
    e2el.push_back(e);
    m.req_ttft.push_back(a);
    m.req_tpot.push_back(p);
    m.req_e2el.push_back(e);
    m.req_queue.push_back(scheduled.empty() || scheduled[i] < 0 ? nan : static_cast<double>(scheduled[i] - reqs[i].arrival) / 1e6);
    const bool ok_ttft = slo.ttft <= 0 || tt.front() - reqs[i].arrival <= slo.ttft;
    const bool ok_tpot = slo.tpot <= 0 || std::isnan(p) || p * 1e6 <= static_cast<double>(slo.tpot);
    if (ok_ttft && ok_tpot) ++good;
  }
  m.ttft = stat(ttft);
  m.tpot = stat(tpot);
  m.itl = stat(itl);
  m.e2el = stat(e2el);
  if (m.completed > 0 && last > first) {
    m.duration_s = static_cast<double>(last - first) / 1e9;
    m.request_throughput = static_cast<double>(m.completed) / m.duration_s;
    m.output_throughput = static_cast<double>(m.total_output) / m.duration_s;
    m.request_goodput = static_cast<double>(good) / m.duration_s;
  }
  return m;
}

}  // namespace

Metrics summarize(const std::vector<Request>& reqs, const std::vector<RequestResult>& res, const Slo& slo) {
  std::vector<const std::vector<TimeNs>*> tokens;
  std::vector<TimeNs> finish, sched;
  for (const auto& r : res) {
    tokens.push_back(&r.token_times);
    finish.push_back(r.finish);
    sched.push_back(r.scheduled);
  }
  return metrics(reqs, tokens, finish, sched, slo);
}

Metrics summarize_measured(const std::vector<Request>& reqs, const Slo& slo) {
  std::vector<const std::vector<TimeNs>*> tokens;
  std::vector<TimeNs> finish;
  for (const auto& r : reqs) {
    tokens.push_back(&r.token_times);
    finish.push_back(r.measured_finish >= 0 ? r.measured_finish : r.token_times.empty() ? -1 : r.token_times.back());
  }
  return metrics(reqs, tokens, finish, {}, slo);
}

}  // namespace bneck::serve
