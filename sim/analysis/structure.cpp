#include "sim/analysis/structure.hpp"

#include <algorithm>
#include <array>
#include <iostream>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "sim/analysis/ranges.hpp"
#include "sim/analysis/structure_loops.hpp"
#include "sim/base/stats.hpp"

namespace bneck {
namespace {

using structure_loops::approximate_loop;
using structure_loops::find_loops;
using structure_loops::kBoundaryAnchor;
using structure_loops::kPeriodAnchor;
using structure_loops::launch_sequences;
using structure_loops::Loop;
using structure_loops::Seq;

// An instance of `ops` (device ops in launch order): its GPU span and its launching calls' span.
StructureInstance instance_of(const Trace& t, std::vector<OpId> ops, std::uint32_t rank, std::uint32_t loop, LaneId lane) {
  StructureInstance in;
  in.rank = rank;
  in.loop = loop;
  in.lane = lane;
  in.ops = std::move(ops);
  const Span gpu = measured_span(t, in.ops);
  in.start_ns = gpu.begin;
  in.end_ns = gpu.end;
  bool first = true;
  for (OpId d : in.ops) {
    const Op& o = t.ops[d];
    TimeNs hs = o.link != kNone ? t.ops[o.link].start : o.start;
    in.host_start_ns = first ? hs : std::min(in.host_start_ns, hs);
    in.host_end_ns = first ? hs : std::max(in.host_end_ns, hs);
    first = false;
  }
  return in;
}

// The training passes of an instance's ops: the runs launched by a thread other than its first
// op's (the caller blocks in backward() while the autograd thread launches), each at least 8 ops
// and 2 % of the instance, and the forward before each: {forward, backward} pairs. A "forward"
// under a quarter of the first one's ops between two such runs is the caller's work inside one
// backward (a sparse embedding's update between the autograd thread's runs), not a microbatch:
// the runs and it are one backward.
std::vector<std::pair<std::vector<OpId>, std::vector<OpId>>> training_passes(const Trace& t, const std::vector<OpId>& ops) {
  auto thread = [&](OpId d) { return t.ops[d].link != kNone ? t.ops[t.ops[d].link].lane : kNone; };
  std::vector<std::pair<std::vector<OpId>, std::vector<OpId>>> out;
  LaneId main = kNone;  // the first launched op's thread (the first ops may have lost their launches)
  for (std::size_t i = 0; i < ops.size() && main == kNone; ++i) main = thread(ops[i]);
  if (main == kNone) return out;
  std::size_t prev = 0;
  for (std::size_t i = 0; i < ops.size();) {
    std::size_t j = i;
    while (j < ops.size() && thread(ops[j]) != kNone && thread(ops[j]) != main) ++j;
    if (j - i >= 8 && (j - i) * 50 >= ops.size()) {
      const auto at = [&](std::size_t k) { return ops.begin() + static_cast<std::ptrdiff_t>(k); };
      if (!out.empty() && 4 * (i - prev) < out.front().first.size())
        out.back().second.insert(out.back().second.end(), at(prev), at(j));
      else
        out.emplace_back(std::vector<OpId>(at(prev), at(i)), std::vector<OpId>(at(i), at(j)));
      prev = j;
    }
    i = j + 1;
  }
  return out;
}

StructureInstance make_instance(const Trace& t, const Seq& s, std::size_t b, std::size_t e, std::uint32_t loop) {
  StructureInstance in;
  in.rank = s.process < t.processes.size() && t.processes[s.process].rank != kNone ? t.processes[s.process].rank : s.process;
  in.loop = loop;
  in.ops.assign(s.dev.begin() + static_cast<std::ptrdiff_t>(b), s.dev.begin() + static_cast<std::ptrdiff_t>(e));
  const Span gpu = measured_span(t, in.ops);
  in.start_ns = gpu.begin;
  in.end_ns = gpu.end;
  bool first = true;
  for (OpId d : in.ops) {
    const Op& o = t.ops[d];
    TimeNs hs = o.link != kNone ? t.ops[o.link].start : o.start;
    in.host_start_ns = first ? hs : std::min(in.host_start_ns, hs);
    in.host_end_ns = first ? hs : std::max(in.host_end_ns, hs);
    first = false;
  }
  in.lane = s.first_thread(b, e);
  return in;
}

std::string symbol_name(const Trace& t, const Seq& s, std::uint32_t sym) {
  if (sym == kBoundaryAnchor) return "the host and GPU gaps at its start";
  if (sym == kPeriodAnchor) return "its period (no kernel or gap marks its start)";
  for (std::size_t i = 0; i < s.sym.size(); ++i)
    if (s.sym[i] == sym) {
      const Op& o = t.ops[s.dev[i]];
      std::string n = o.kind == OpKind::Kernel ? canonical_kernel_name(t.name(o)) : t.name(o);
      return n.size() > 60 ? n.substr(0, 57) + "..." : n;
    }
  return "?";
}

constexpr double kMaxSpread = 5;

void summarize(StructureLevel& lv) {
  std::sort(lv.instances.begin(), lv.instances.end(), [](const StructureInstance& a, const StructureInstance& b) {
    return std::make_tuple(a.rank, a.start_ns, a.loop) < std::make_tuple(b.rank, b.start_ns, b.loop);
  });
  std::vector<double> spans, periods;
  for (std::size_t i = 0; i < lv.instances.size(); ++i) {
    const auto& in = lv.instances[i];
    spans.push_back(static_cast<double>(in.end_ns - in.start_ns));
    for (std::size_t j = i + 1; j < lv.instances.size(); ++j)
      if (lv.instances[j].rank == in.rank && lv.instances[j].loop == in.loop) {
        periods.push_back(static_cast<double>(lv.instances[j].start_ns - in.start_ns));
        break;
      }
  }
  if (spans.empty()) return;
  lv.median_ns = static_cast<TimeNs>(median(spans));
  lv.period_ns = static_cast<TimeNs>(median(periods));
  auto [mn, mx] = std::minmax_element(spans.begin(), spans.end());
  lv.spread = lv.median_ns > 0 ? (*mx - *mn) / static_cast<double>(lv.median_ns) : 0;
  // A level is one unit repeated: the middle 80 % of its spans within kMaxSpread of the median
  // (warm-ups and a slow outlier aside). Beyond, it is not offered (Structure::rejected).
  const double p10 = quantile(spans, 0.1), p90 = quantile(spans, 0.9);
  if (lv.median_ns > 0 && (p90 - p10) / static_cast<double>(lv.median_ns) > kMaxSpread)
    lv.rejected = "its middle 80 % of spans spread " +
                  std::to_string(static_cast<long long>(std::llround(100 * (p90 - p10) / static_cast<double>(lv.median_ns)))) +
                  " % of their median (at most " + std::to_string(static_cast<int>(100 * kMaxSpread)) + " %): not one repeated unit";
}

// The device ops range `r` holds (RangeIndex's rule) as an instance: their GPU span, the range's
// host span and thread.
StructureInstance range_instance(const Trace& t, const RangeIndex& idx, std::size_t r, std::uint32_t loop) {
  StructureInstance in;
  in.ops = idx.device_ops(r);
  in.rank = t.rank_of_lane(t.ranges[r].lane);
  in.loop = loop;
  in.lane = t.ranges[r].lane;
  in.host_start_ns = t.ranges[r].start;
  in.host_end_ns = t.ranges[r].end;
  const Span gpu = measured_span(t, in.ops);
  in.start_ns = gpu.begin;
  in.end_ns = gpu.end;
  return in;
}

// A level whose instances come from several loops (a run in phases: a denoising loop, then a
// decoder's) was described by the first loop found: the others are named with it, each by its
// count of instances and their device ops (the first instance's), in order of first appearance:
// "; its 183 instances from 4 loops: 26 of 15 device ops, 54 of 7, 77 of 10, 26 of 17".
void name_every_loop(StructureLevel& lv) {
  if (lv.how.find("device ops") == std::string::npos) return;  // module ranges, marked steps: not loops
  std::vector<std::array<std::size_t, 3>> loops;               // {loop id, device ops, instances}
  for (const StructureInstance& in : lv.instances) {
    auto it = std::find_if(loops.begin(), loops.end(), [&](const auto& l) { return l[0] == in.loop; });
    if (it == loops.end())
      loops.push_back({in.loop, in.ops.size(), 1});
    else
      ++(*it)[2];
  }
  if (loops.size() < 2) return;
  std::string all;
  for (const auto& l : loops)
    all += (all.empty() ? "" : ", ") + std::to_string(l[2]) + " of " + std::to_string(l[1]) + (all.empty() ? " device ops" : "");
  lv.how += "; its " + std::to_string(lv.instances.size()) + " instances from " + std::to_string(loops.size()) + " loops: " + all;
}

// Annotations help where present: a PyTorch profile's ProfilerStep#N ranges are its steps (an
// inference engine's step ranges where it has none). When
// two thirds of the iterations found lie inside them, two or more a step (a profile of one or two steps, where the loop
// found is the layers), the steps become the iterations and that loop their layers. When most of
// the iterations found cut across the steps instead (a loop of two steps, or one rotated into a
// step: where the gaps inside a step rival those between steps), the steps, three or more and one
// unit, become the iterations; layers found inside one step stay, and the passes are found again
// in each step (returns true). Where no loop was found, two or more steps that are one unit become
// the iterations (returns true).
bool promote_profiler_steps(const Trace& t, StructureLevel& iter, StructureLevel& layer) {
  // The profiler's step ranges, else an inference engine's own (vLLM's execute_..., SGLang's
  // step[...]): the first family the trace holds, so that nested ones do not count twice. (The
  // index of every range is built only when one is found.)
  std::vector<std::size_t> marked;
  const char* family = "";
  for (const auto& [prefix, words] : {std::pair{"ProfilerStep#", "the PyTorch profiler's ProfilerStep#N ranges"},
                                      std::pair{"execute_", "the engine's step ranges (execute_..., as vLLM names them)"},
                                      std::pair{"step[", "SGLang's step ranges (step[...])"}}) {
    for (std::size_t r = 0; r < t.ranges.size(); ++r)
      if (!t.ranges[r].structure && t.strings.str(t.ranges[r].name).rfind(prefix, 0) == 0) marked.push_back(r);
    family = words;
    if (!marked.empty()) break;
  }
  if (marked.empty()) return false;
  RangeIndex idx(t);
  std::vector<StructureInstance> steps;
  for (std::size_t r : marked)
    if (StructureInstance in = range_instance(t, idx, r, 0); !in.ops.empty()) steps.push_back(std::move(in));
  if (steps.empty()) return false;
  // No loop found in the device ops (a step of a few copies and kernels, or steps unlike each
  // other op for op): two or more marked steps that are one unit by summarize's rule and hold half
  // the trace's device ops or more (steps whose copies the trace does not tie to their launches
  // hold a kernel or two of them) are the iterations, their passes found again in each.
  if (iter.instances.empty()) {
    std::size_t held = 0;
    for (const StructureInstance& st : steps) held += st.ops.size();
    if (steps.size() < 2 || 2 * held < t.device_op_count()) return false;
    StructureLevel probe{"steps", "", steps, 0, 0, 0, {}};
    summarize(probe);
    if (!probe.rejected.empty()) return false;
    iter.instances = std::move(steps);
    iter.how = std::string(family) + " (no loop found in the device ops)";
    return true;
  }
  auto holds = [](const StructureInstance& st, const StructureInstance& i) {
    return st.rank == i.rank && st.start_ns <= i.start_ns && i.end_ns <= st.end_ns;
  };
  auto inside = [&](const StructureInstance& i) {
    return std::any_of(steps.begin(), steps.end(), [&](const StructureInstance& st) { return holds(st, i); });
  };
  if (steps.size() * 2 <= iter.instances.size()) {
    std::vector<StructureInstance> inner;
    for (StructureInstance& i : iter.instances)
      if (inside(i)) inner.push_back(std::move(i));
    // Most of them inside (a warm-up outside the profiled steps may repeat the loop too).
    if (inner.size() * 3 < iter.instances.size() * 2 || inner.size() < 2 * steps.size()) return false;
    layer.instances = std::move(inner);
    layer.how = iter.how + " (inside the steps)";
    iter.instances = std::move(steps);
    iter.how = std::string(family) + ", holding the loop found";
    return false;
  }
  // The loop found cuts across the steps: most of its instances inside none, and the steps hold
  // most of the device ops its instances hold (the run is the steps), one unit by summarize's rule.
  std::size_t across = 0, loop_ops = 0, in_steps = 0;
  std::unordered_set<OpId> stepped;
  for (const StructureInstance& st : steps) stepped.insert(st.ops.begin(), st.ops.end());
  for (const StructureInstance& i : iter.instances) {
    across += inside(i) ? 0 : 1;
    loop_ops += i.ops.size();
    for (OpId o : i.ops) in_steps += stepped.count(o);
  }
  if (steps.size() < 3 || across * 2 <= iter.instances.size() || in_steps * 3 < loop_ops * 2) return false;
  StructureLevel probe{"steps", "", steps, 0, 0, 0, {}};
  summarize(probe);
  if (!probe.rejected.empty()) return false;
  const std::string found = iter.how.substr(0, iter.how.find(','));  // "a loop of N device ops x K"
  std::vector<StructureInstance> inner;
  for (StructureInstance& l : layer.instances) {
    // Inside a step and at most half of it (a loop of whole steps is no layer).
    if (std::any_of(steps.begin(), steps.end(),
                    [&](const StructureInstance& st) { return holds(st, l) && 2 * l.ops.size() <= st.ops.size(); }))
      inner.push_back(std::move(l));
  }
  layer.instances = std::move(inner);
  iter.instances = std::move(steps);
  iter.how = std::string(family) + " (the loop found, " + found + ", cut across them)";
  return true;
}

// A module range's class: "nn.Module: Qwen2DecoderLayer_3" -> "Qwen2DecoderLayer" (empty: no module).
std::string module_class(const std::string& n) {
  const std::size_t p = std::char_traits<char>::length(kModulePrefix);
  if (!module_range_name(n)) return "";
  std::size_t e = n.find_last_not_of("0123456789");
  if (e != std::string::npos && e + 1 < n.size() && n[e] == '_' && e > p) return n.substr(p, e - p);
  return n.substr(p);
}

// Annotations help where present: a profile with the modules' ranges (with_modules, with_stack)
// names its layers. The layer is the outermost module class of which one module calls two or more
// (a decoder's layers under its model; not the Linear under them): each call an instance, with
// the device ops launched while it ran. Taken for forward-only runs (a backward has no module
// ranges), where the instances are one repeated unit (their spans' spread) and hold half the
// iterations' device ops or more; the loop found stays otherwise.
void module_layers(const Trace& t, StructureLevel& layer, const StructureLevel& bwd, const StructureLevel& iter) {
  if (!bwd.instances.empty()) return;
  std::vector<std::size_t> mods;
  std::unordered_map<std::size_t, std::string> cls;
  for (std::size_t r = 0; r < t.ranges.size(); ++r)
    if (!t.ranges[r].structure)
      if (std::string c = module_class(t.strings.str(t.ranges[r].name)); !c.empty()) {
        mods.push_back(r);
        cls.emplace(r, std::move(c));
      }
  if (mods.size() < 2) return;
  auto module_parent = [&](std::size_t r) {
    for (std::uint32_t p = t.ranges[r].parent; p != kNone; p = t.ranges[p].parent)
      if (cls.count(p)) return static_cast<std::size_t>(p);
    return static_cast<std::size_t>(kNone);
  };
  // Classes called two or more times by one module (or at the top, by no module).
  std::map<std::pair<std::size_t, std::string>, std::size_t> calls;
  for (std::size_t r : mods) ++calls[{module_parent(r), cls[r]}];
  std::set<std::string> repeated;
  for (const auto& [k, n] : calls)
    if (n >= 2 && k.first != static_cast<std::size_t>(kNone)) repeated.insert(k.second);
  // The outermost: no instance inside a module of a repeated class.
  std::set<std::string> inner;
  for (std::size_t r : mods)
    if (repeated.count(cls[r]))
      for (std::size_t p = module_parent(r); p != static_cast<std::size_t>(kNone); p = module_parent(p))
        if (repeated.count(cls[p])) inner.insert(cls[r]);
  RangeIndex idx(t);
  std::string best;
  std::vector<StructureInstance> chosen;
  std::size_t best_ops = 0;
  for (const std::string& c : repeated) {
    if (inner.count(c)) continue;
    std::vector<StructureInstance> ins;
    std::map<std::size_t, std::uint32_t> loop_of;  // each calling module's calls a loop
    std::size_t ops = 0;
    for (std::size_t r : mods) {
      if (cls[r] != c) continue;
      StructureInstance in = range_instance(t, idx, r, 0);
      if (in.ops.empty()) continue;
      in.loop = loop_of.emplace(module_parent(r), static_cast<std::uint32_t>(loop_of.size())).first->second;
      ops += in.ops.size();
      ins.push_back(std::move(in));
    }
    if (ins.size() >= 2 && ops > best_ops) {
      best = c, best_ops = ops;
      chosen = std::move(ins);
    }
  }
  // They must hold most of the work: half the device ops of the iterations (of the trace without
  // any), or they are a part's (a diffusion pipeline's text encoder beside a denoiser whose blocks
  // record no module ranges).
  std::size_t total = iter.instances.empty() ? t.device_op_count() : 0;
  for (const StructureInstance& in : iter.instances) total += in.ops.size();
  if (chosen.empty() || 2 * best_ops < total) return;
  StructureLevel lv{"layer", "", std::move(chosen), 0, 0, 0, {}};
  summarize(lv);
  if (!lv.rejected.empty()) return;
  layer.instances = std::move(lv.instances);
  layer.how = "the trace's module ranges: " + best + " (the outermost module a module calls repeatedly), " +
              std::to_string(layer.instances.size()) + " calls";
}

}  // namespace

const StructureLevel* Structure::level(const std::string& name) const {
  for (const auto& l : levels)
    if (l.name == name) return &l;
  return nullptr;
}

Structure find_structure(const Trace& t) {
  Structure st;
  StructureLevel iter{"iteration", "", {}, 0, 0, 0, {}}, layer{"layer", "", {}, 0, 0, 0, {}};
  StructureLevel fwd{"forward", "the ops before each backward pass in each iteration", {}, 0, 0, 0, {}};
  StructureLevel bwd{"backward", "the runs of each iteration's ops launched by another thread (an autograd engine)", {}, 0, 0, 0, {}};
  StructureLevel mb{
      "microbatch", "a forward and the backward after it, where an iteration holds two or more (gradient accumulation)", {}, 0, 0, 0, {}};
  StructureLevel run{"run", "each process's launches, first to last", {}, 0, 0, 0, {}};
  std::uint32_t loop_id = 0, inner_id = 0;
  for (const Seq& s : launch_sequences(t)) {
    const std::size_t n = s.sym.size();
    if (n) run.instances.push_back(make_instance(t, s, 0, n, 0));
    std::vector<Loop> loops = find_loops(s, 0, n, 2, true);  // one op repeated is no iteration
    // The exact loop that covers most; alike-but-unequal segments replace the exact loops when
    // they cover 1.5x as much at no finer a scale (an engine's steps, not their repeated layers).
    std::size_t exact = 0, exact_len = 0;
    for (const Loop& l : loops)
      if (l.coverage() > exact) {
        exact = l.coverage();
        exact_len = l.len;
      }
    if (exact * 10 < n * 9)
      if (auto a = approximate_loop(s); a && a->coverage() * 2 > exact * 3 && 2 * a->len >= exact_len) {
        iter.how = "segments of about " + std::to_string(a->len) + " device ops (alike, not equal) x " + std::to_string(a->starts.size()) +
                   ", starting at " +
                   (a->anchor == kBoundaryAnchor ? std::string("the strongest host and GPU gaps") : symbol_name(t, s, a->anchor));
        const std::uint32_t id = loop_id++;
        for (std::size_t j = 0; j < a->starts.size(); ++j)
          iter.instances.push_back(make_instance(t, s, a->starts[j], a->starts[j] + a->lens[j], id));
        continue;  // their insides differ: no layers copied by offset
      }
    // Backward passes of the window [b, e): the runs of ops launched by a thread other than the
    // first launched op's (the caller blocks in backward() while the autograd thread launches), each at
    // least 8 ops and 2 % of the window; the forward pass before each; with two or more,
    // microbatches (gradient accumulation: forward and backward, M times, then the optimizer).
    auto passes = [&](std::size_t b, std::size_t e) {
      std::vector<std::pair<std::size_t, std::size_t>> runs;
      const LaneId caller = s.first_thread(b, e);
      if (caller == kNone) return runs;
      for (std::size_t i = b; i < e;) {
        std::size_t j = i;
        while (j < e && s.thread[j] != kNone && s.thread[j] != caller) ++j;
        if (j - i >= 8 && (j - i) * 50 >= e - b) runs.emplace_back(i - b, j - b);
        i = j + 1;
      }
      return runs;
    };
    auto add_passes = [&](const std::vector<std::pair<std::size_t, std::size_t>>& runs, std::size_t b, std::uint32_t id) {
      std::size_t prev = 0;
      for (const auto& [rb, re] : runs) {
        bwd.instances.push_back(make_instance(t, s, b + rb, b + re, id));
        if (rb > prev) fwd.instances.push_back(make_instance(t, s, b + prev, b + rb, id));
        if (runs.size() >= 2) mb.instances.push_back(make_instance(t, s, b + prev, b + re, id));
        prev = re;
      }
    };
    std::size_t loop_end = 0;  // the end of the previous loop's last window
    for (const Loop& l : loops) {
      const std::size_t prev_end = loop_end;
      loop_end = l.starts.back() + l.len;
      if (auto cyc = structure_loops::split_alike(s, l)) {
        // A cycle of alike-but-unequal units: each unit an iteration, no layers copied by offset.
        if (iter.how.empty())
          iter.how = "a cycle of " + std::to_string(cyc->starts.size() / l.starts.size()) + " alike, unequal units (" +
                     std::to_string(l.len) + " device ops) x " + std::to_string(l.starts.size()) +
                     ", cut at the host and GPU gaps as strong as its start";
        const std::uint32_t id = loop_id++;
        for (std::size_t j = 0; j < cyc->starts.size(); ++j) {
          const std::size_t b = cyc->starts[j], e = b + cyc->lens[j];
          iter.instances.push_back(make_instance(t, s, b, e, id));
          add_passes(passes(b, e), b, id);
        }
        continue;
      }
      if (auto outer = structure_loops::outer_of_runs(s, l, prev_end, n)) {
        // Units of a varying number of the loop's instances (generate() calls of different
        // lengths): each unit an iteration, the loop's instances its layers.
        if (iter.how.empty())
          iter.how = "units of a varying number of a loop of " + std::to_string(l.len) + " device ops (" + std::to_string(l.starts.size()) +
                     " in " + std::to_string(outer->starts.size()) + " runs), cut at the strongest host and GPU gap between runs";
        if (layer.how.empty())
          layer.how = "a loop of " + std::to_string(l.len) + " device ops x " + std::to_string(l.starts.size()) + " in runs, anchored on " +
                      symbol_name(t, s, l.anchor);
        const std::uint32_t id = loop_id++, lid = inner_id++;
        for (std::size_t j = 0; j < outer->starts.size(); ++j) {
          const std::size_t b = outer->starts[j], e = b + outer->lens[j];
          iter.instances.push_back(make_instance(t, s, b, e, id));
          add_passes(passes(b, e), b, id);
        }
        for (std::size_t b : l.starts) layer.instances.push_back(make_instance(t, s, b, b + l.len, lid));
        continue;
      }
      if (iter.how.empty())
        iter.how = "a loop of " + std::to_string(l.len) + " device ops x " + std::to_string(l.starts.size()) + ", anchored on " +
                   symbol_name(t, s, l.anchor);
      const std::uint32_t id = loop_id++;
      for (std::size_t b : l.starts) iter.instances.push_back(make_instance(t, s, b, b + l.len, id));
      // Layers: inside one instance (all hold the same ops), copied into the others by offset.
      const std::size_t ref = l.starts[0];
      for (const Loop& in : find_loops(s, ref, ref + l.len, 2, false)) {
        if (layer.how.empty())
          layer.how = "a loop of " + std::to_string(in.len) + " device ops x " + std::to_string(in.starts.size()) +
                      " in each iteration, anchored on " + symbol_name(t, s, in.anchor);
        const std::uint32_t lid = inner_id++;
        for (std::size_t b : l.starts)
          for (std::size_t ib : in.starts) layer.instances.push_back(make_instance(t, s, b + (ib - ref), b + (ib - ref) + in.len, lid));
        // The same windows before the loop's first instance: a warm-up iteration that differs
        // elsewhere (first-call kernels) still holds its layers (a denoising loop's steps).
        const std::uint64_t h = s.window(in.starts[0], in.len);
        for (std::size_t p = prev_end; p + in.len <= l.starts[0];)
          if (s.window(p, in.len) == h) {
            layer.instances.push_back(make_instance(t, s, p, p + in.len, lid));
            p += in.len;
          } else {
            ++p;
          }
      }
      const auto runs = passes(ref, ref + l.len);
      for (std::size_t b : l.starts) add_passes(runs, b, id);
    }
  }
  if (promote_profiler_steps(t, iter, layer)) fwd.instances.clear(), bwd.instances.clear(), mb.instances.clear();
  if (iter.instances.empty()) run.instances.clear();  // no loop and no marked steps: nothing to say
  // A training step the passes were not found in: a profile of one step (its ProfilerStep#N the
  // iteration, or none: the loop found is its layers). Each iteration's passes from its ops; where
  // the iterations hold none and a process's whole run holds one forward and one backward, that run
  // is the step and the loop found its layers.
  auto add_op_passes = [&](const StructureInstance& in) {
    const auto p = training_passes(t, in.ops);
    for (const auto& [f, b] : p) {
      if (!f.empty()) fwd.instances.push_back(instance_of(t, f, in.rank, in.loop, in.lane));
      bwd.instances.push_back(instance_of(t, b, in.rank, in.loop, in.lane));
      if (p.size() >= 2) {
        std::vector<OpId> both = f;
        both.insert(both.end(), b.begin(), b.end());
        mb.instances.push_back(instance_of(t, std::move(both), in.rank, in.loop, in.lane));
      }
    }
    return !p.empty();
  };
  if (bwd.instances.empty()) {
    bool any = false;
    for (const StructureInstance& in : iter.instances) any = add_op_passes(in) || any;
    if (!any) {
      fwd.instances.clear(), mb.instances.clear();
      // One forward and one backward, each a fifth of the run or more, every loop instance found
      // inside one of them (layers, not steps).
      auto one_step = [&](const StructureInstance& r) {
        const auto p = training_passes(t, r.ops);
        if (p.size() != 1 || 5 * p[0].first.size() < r.ops.size() || 5 * p[0].second.size() < r.ops.size()) return false;
        const Span f = measured_span(t, p[0].first), b = measured_span(t, p[0].second);
        for (const StructureInstance& in : iter.instances)
          if (in.rank == r.rank && !(in.end_ns <= f.end || in.start_ns >= b.begin)) return false;
        return true;
      };
      for (const StructureInstance& r : run.instances)
        if (one_step(r)) {
          if (layer.instances.empty()) {
            layer.instances = std::move(iter.instances);
            layer.how = iter.how + " (inside the one training step)";
          }
          iter.instances = {r};
          iter.how = "the run, one training step: a forward and the backward another thread launches";
          add_op_passes(r);
          break;
        }
    }
  }
  module_layers(t, layer, bwd, iter);
  // A warm-up before the first iteration (first-call kernels, another shape) is no instance: said
  // where the device ops a process launched before it are half an iteration's or more.
  for (const StructureInstance& r : run.instances) {
    std::vector<const StructureInstance*> mine;
    for (const StructureInstance& in : iter.instances)
      if (in.rank == r.rank && !in.ops.empty()) mine.push_back(&in);
    if (mine.size() < 2 || r.ops.empty()) continue;
    const auto first = *std::min_element(mine.begin(), mine.end(), [](auto a, auto b) { return a->start_ns < b->start_ns; });
    std::vector<double> count;
    for (const StructureInstance* in : mine) count.push_back(static_cast<double>(in->ops.size()));
    const auto at = std::find(r.ops.begin(), r.ops.end(), first->ops.front());
    const std::size_t before = static_cast<std::size_t>(at - r.ops.begin());
    if (at == r.ops.end() || 2 * static_cast<double>(before) < median(count)) continue;
    const Span w = measured_span(t, std::vector<OpId>(r.ops.begin(), at));
    st.notes.push_back("@iteration of rank " + std::to_string(r.rank) + ": the " + std::to_string(before) +
                       " device ops before its first instance (" + format_duration(w.length()) +
                       " of GPU span: a warm-up or setup that repeats no iteration) are left out");
  }
  for (StructureLevel* lv : {&iter, &layer}) name_every_loop(*lv);
  for (StructureLevel* lv : {&run, &iter, &layer, &mb, &fwd, &bwd})
    if (!lv->instances.empty()) {
      summarize(*lv);
      (lv->rejected.empty() ? st.levels : st.rejected).push_back(std::move(*lv));
    }
  // Conventions the trace follows, for the reader of info and replay.
  std::map<std::string, std::size_t> families;
  for (const Range& r : t.ranges) {
    if (r.structure) continue;
    std::string n = t.strings.str(r.name);
    if (n.rfind("ProfilerStep#", 0) == 0) {
      families["ProfilerStep#N ranges (PyTorch profiler steps)"]++;
    } else if (module_range_name(n)) {
      families["module ranges (nn.Module: with_modules, with_stack)"]++;
    } else if (n.find(", sizes = ") != std::string::npos) {
      families["op ranges with shapes (emit_nvtx or record_shapes)"]++;
    } else if (n.find(", op_id = ") != std::string::npos || n.find(", seq = ") != std::string::npos || n.rfind("aten::", 0) == 0 ||
               n.rfind("autograd::", 0) == 0 || n.find('#') != std::string::npos) {
      families["PyTorch op ranges (emit_nvtx, record_function)"]++;
    } else if (!n.empty() && n.size() <= 40 && std::isdigit(static_cast<unsigned char>(n.back()))) {
      std::size_t k = n.find_last_not_of("0123456789");
      families["numbered ranges " + n.substr(0, k + 1) + "N"]++;
    }
  }
  for (const auto& [f, c] : families) st.conventions.push_back(f + ": " + std::to_string(c));
  if (const StructureLevel* b = st.level("backward"))
    st.conventions.push_back("backward launched by another thread than the caller's (" + std::to_string(b->instances.size()) +
                             " iterations): ranges take it by the process rule");
  std::size_t graph_nodes = 0;
  for (const Op& o : t.ops) graph_nodes += (o.flags & Op::kFlagGraphNode) ? 1 : 0;
  if (graph_nodes) st.conventions.push_back("CUDA graph nodes: " + std::to_string(graph_nodes));
  return st;
}

void add_structure_ranges(Trace& t, const Structure& s) {
  for (const Range& r : t.ranges)
    if (r.structure) return;
  // Each instance's parent: the instance of the level above that holds it (@run > @iteration >
  // @layer, @forward, @backward), found by start among that level's ranges of its process.
  std::map<std::string, std::vector<std::uint32_t>> by_level;  // range indices, by host start
  auto process_of = [&](const Range& r) { return t.lanes[r.lane].process; };
  for (const StructureLevel& lv : s.levels) {
    StrId name = t.strings.intern("@" + lv.name);
    const char* up = lv.name == "run" ? nullptr : lv.name == "iteration" ? "run" : "iteration";
    const std::vector<std::uint32_t>* parents = up && by_level.count(up) ? &by_level[up] : nullptr;
    auto& mine = by_level[lv.name];
    for (const StructureInstance& in : lv.instances) {
      if (in.ops.empty()) continue;
      Range r;
      r.start = in.host_start_ns;
      r.end = in.host_end_ns;
      r.name = name;
      r.lane = in.lane;
      if (r.lane == kNone) {  // no launch calls: device time on the first op's stream
        r.lane = t.ops[in.ops.front()].lane;
        r.start = t.ops[in.ops.front()].start;
        r.end = r.start;
        for (OpId o : in.ops) r.end = std::max(r.end, t.ops[o].start);
      }
      r.structure = true;
      if (parents) {
        auto it =
            std::upper_bound(parents->begin(), parents->end(), r.start, [&](TimeNs v, std::uint32_t p) { return v < t.ranges[p].start; });
        while (it != parents->begin()) {
          --it;
          const Range& p = t.ranges[*it];
          if (process_of(p) == process_of(r) && p.start <= r.start && r.end <= p.end) {
            r.parent = *it;
            r.depth = static_cast<std::uint16_t>(p.depth + 1);
            break;
          }
          if (p.end < r.start && std::distance(parents->begin(), it) + 64 < static_cast<std::ptrdiff_t>(parents->size())) break;
        }
      }
      mine.push_back(static_cast<std::uint32_t>(t.ranges.size()));
      t.ranges.push_back(r);
    }
    std::sort(mine.begin(), mine.end(), [&](std::uint32_t a, std::uint32_t b) { return t.ranges[a].start < t.ranges[b].start; });
  }
}

std::pair<std::string, std::string> default_loop_ranges(const Trace& t) {
  std::size_t iterations = 0, layers = 0;
  for (const Range& r : t.ranges)
    if (r.structure) {
      const std::string& n = t.strings.str(r.name);
      iterations += n == "@iteration";
      layers += n == "@layer";
    }
  if (iterations >= 4) return {"@run", "@iteration"};
  if (layers && iterations) return {"@iteration", "@layer"};
  return {"", ""};
}

bool add_structure_ranges_if_named(Trace& t, const std::string& text) {
  if (text.find('@') == std::string::npos) return false;
  const Structure st = find_structure(t);
  for (const StructureLevel& lv : st.rejected)
    if (text.find("@" + lv.name) != std::string::npos)
      std::cerr << "bneck: warning: @" << lv.name << " is not a level of " << t.source << ": " << lv.rejected << "\n";
  add_structure_ranges(t, st);
  return true;
}

}  // namespace bneck
