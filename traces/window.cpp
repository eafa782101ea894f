#include "traces/window.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>
#include <vector>

#include "sim/base/units.hpp"

namespace bneck {

namespace {

std::string grouped(std::size_t v) {  // 1234567 -> "1,234,567"
  const std::string d = std::to_string(v);
  std::string s;
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (i > 0 && (d.size() - i) % 3 == 0) s += ',';
    s += d[i];
  }
  return s;
}

}  // namespace

WindowSpan middle_window(const Trace& t, std::size_t ops) {
  WindowSpan w;
  const std::size_t n = t.ops.size();
  w.total_ops = n;
  w.end = static_cast<OpId>(n);
  if (ops >= n) {
    w.quiet_begin = w.quiet_end = true;
    return w;
  }
  const std::size_t want_begin = (n - ops) / 2, want_end = want_begin + ops, reach = ops / 10;
  w.begin = static_cast<OpId>(want_begin);
  w.end = static_cast<OpId>(want_end);
  // Quiet points: an op before which every device op that started has ended.
  TimeNs busy_until = std::numeric_limits<TimeNs>::min();
  bool begin_found = false;
  for (std::size_t i = 0; i < n && i <= want_end + reach; ++i) {
    const Op& o = t.ops[i];
    const bool quiet = busy_until <= o.start;
    if (!begin_found && i >= want_begin && i <= want_begin + reach && quiet) {
      w.begin = static_cast<OpId>(i);
      w.quiet_begin = begin_found = true;
    }
    if (i >= want_end && quiet && i > w.begin) {
      w.end = static_cast<OpId>(i);
      w.quiet_end = true;
      break;
    }
    if (is_device_op(o.kind) && o.duration() > 0) busy_until = std::max(busy_until, o.end());
  }
  return w;
}

Trace trace_window(Trace&& t, const WindowSpan& w) {
  const OpId b = w.begin, e = std::min<OpId>(w.end, static_cast<OpId>(t.ops.size()));
  Trace out;
  out.source = std::move(t.source);
  out.format =
      t.format + ", ops " + std::to_string(b) + " .. " + std::to_string(e == 0 ? 0 : e - 1) + " of " + std::to_string(t.ops.size());
  out.measured = t.measured;
  out.strings = std::move(t.strings);
  out.devices = std::move(t.devices);
  out.processes = std::move(t.processes);
  out.lanes = std::move(t.lanes);
  out.kernels = std::move(t.kernels);
  out.copies = std::move(t.copies);
  out.apis = std::move(t.apis);
  out.anomalies = std::move(t.anomalies);
  out.range_scope = t.range_scope;
  if (b >= e) {
    out.finalize();
    return out;
  }
  auto inside = [&](OpId id) { return id >= b && id < e; };
  TimeNs t0 = t.ops[b].start, t1 = t0;
  out.ops.reserve(e - b);
  for (OpId i = b; i < e; ++i) {
    Op o = t.ops[i];
    if (o.link != kNone) o.link = inside(o.link) ? o.link - b : kNone;
    t1 = std::max(t1, o.end());
    out.ops.push_back(o);
  }
  if (e < t.ops.size()) t1 = std::max(t1, t.ops[e].start);  // the stretch lasts until the next op
  t.ops.clear();
  t.ops.shrink_to_fit();
  for (const ExplicitDep& d : t.deps)
    if (inside(d.from) && inside(d.to)) out.deps.push_back({d.from - b, d.to - b, d.type, d.delay});
  for (const Range& r : t.ranges)
    if (r.start >= t0 && r.end <= t1) {
      Range c = r;
      c.parent = kNone;  // finalize() finds it again among the ranges kept
      out.ranges.push_back(c);
    }
  for (const auto& u : t.unnamed_ops)
    if (u.second >= t0 && u.second <= t1) out.unnamed_ops.push_back(u);
  for (Collective& c : t.collectives) {
    if (!std::all_of(c.members.begin(), c.members.end(), inside)) continue;
    for (OpId& m : c.members) m -= b;
    out.collectives.push_back(std::move(c));
  }
  out.finalize();
  return out;
}

std::string window_text(const Trace& whole, const WindowSpan& w) {
  const std::size_t n = whole.ops.size();
  if (n == 0 || w.begin >= w.end) return "no ops";
  // Spans, device time by op name, and busy time (device ops' durations, summed) of the run and the stretch.
  TimeNs run0 = whole.ops.front().start, run1 = run0, w0 = whole.ops[w.begin].start, w1 = w0;
  std::vector<double> run_by(whole.strings.size(), 0), win_by(whole.strings.size(), 0);
  double run_dev = 0, win_dev = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const Op& o = whole.ops[i];
    const bool in = i >= w.begin && i < w.end;
    run1 = std::max(run1, o.end());
    if (in) w1 = std::max(w1, o.end());
    if (!is_device_op(o.kind) || o.name >= run_by.size()) continue;
    const auto d = static_cast<double>(o.duration());
    run_by[o.name] += d;
    run_dev += d;
    if (in) {
      win_by[o.name] += d;
      win_dev += d;
    }
  }
  // How far the stretch's device time by op name is from the run's (total variation distance:
  // half the sum of the shares' differences; 0 the same mix, 100 % nothing in common).
  double tv = 0;
  for (std::size_t k = 0; k < run_by.size() && run_dev > 0 && win_dev > 0; ++k) tv += std::abs(win_by[k] / win_dev - run_by[k] / run_dev);
  tv = run_dev > 0 && win_dev > 0 ? 50.0 * tv : 100.0;
  char which[96], like[200];
  const double share = 100.0 * static_cast<double>(w.end - w.begin) / static_cast<double>(n);
  std::snprintf(which, sizeof which, " (%.*f %% of its ops, from its middle; ", share < 1 ? 2 : 0, share);
  std::snprintf(like, sizeof like,
                "device time %.0f %% of its span (the run's: %.0f %%), its device time by op name %.1f %% from the run's",
                w1 > w0 ? 100.0 * win_dev / static_cast<double>(w1 - w0) : 0.0,
                run1 > run0 ? 100.0 * run_dev / static_cast<double>(run1 - run0) : 0.0, tv);
  return "ops " + grouped(w.begin) + " .. " + grouped(w.end - 1) + " of " + grouped(n) + which + format_duration(w1 - w0) +
         " of the run's " + format_duration(run1 - run0) + ")\n" + like;
}

}  // namespace bneck
