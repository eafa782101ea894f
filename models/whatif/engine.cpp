// The what-if engine: the baseline case and the application of a transform list, plus the
// registry lookups, scenario files and command-line parsing that every transform shares.
#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/measured.hpp"
#include "models/whatif/transform.hpp"
#include "sim/analysis/analysis.hpp"
#include "sim/analysis/ranges.hpp"
#include "sim/base/units.hpp"
#include "sim/base/error.hpp"
#include "sim/base/json_input.hpp"
#include "sim/whatif/selector.hpp"

namespace bneck {

Graph& WhatIfCase::edit_graph() {
  if (graph.use_count() != 1 || !graph) graph = std::make_shared<Graph>(*graph);
  return const_cast<Graph&>(*graph);
}

std::vector<bool> WhatIfContext::select(const std::string& sel, bool device_only) const {
  std::vector<bool> hit(trace.ops.size(), false);
  if (sel.empty()) {
    for (OpId i = 0; i < trace.ops.size(); ++i) hit[i] = is_device_op(trace.ops[i].kind);
    return hit;
  }
  Selector s = Selector::parse(sel);
  s.bind(trace);
  for (OpId i = 0; i < trace.ops.size(); ++i) hit[i] = (!device_only || is_device_op(trace.ops[i].kind)) && s.matches(i);
  return hit;
}

std::size_t count_selected(const std::vector<bool>& v) { return static_cast<std::size_t>(std::count(v.begin(), v.end(), true)); }

std::string fmt_num(const char* f, double a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, a);
  return buf;
}

std::string checked_selector(const std::string& sel) {
  if (!sel.empty()) (void)Selector::parse(sel);  // throws on a malformed selector
  return sel;
}

namespace {
std::string norm(std::string s) {
  std::replace(s.begin(), s.end(), '_', '-');
  return s;
}
}  // namespace

// The companion `name` of `d` (normalized), or nullptr.
static const char* companion_of(const TransformDef* d, const std::string& name) {
  for (const char* const* c = d->companions; c && *c; ++c) {
    std::string n(*c);
    n = n.substr(0, n.find('='));
    if (norm(n) == norm(name)) return *c;
  }
  return nullptr;
}

static std::string companion_name(const char* c) {
  std::string n(c);
  return n.substr(0, n.find('='));
}

const std::string* CompanionArgs::find(const std::string& name) const {
  for (auto it = options.rbegin(); it != options.rend(); ++it)
    if (it->first == name) return &it->second;
  return nullptr;
}

CompanionArgs split_companions(const std::string& arg) {
  CompanionArgs out;
  std::size_t nl = arg.find('\n');
  out.main = arg.substr(0, nl);
  while (nl != std::string::npos) {
    std::size_t next = arg.find('\n', nl + 1);
    std::string kv = arg.substr(nl + 1, next == std::string::npos ? std::string::npos : next - nl - 1);
    std::size_t eq = kv.find('=');
    out.options.emplace_back(kv.substr(0, eq), eq == std::string::npos ? std::string() : kv.substr(eq + 1));
    nl = next;
  }
  return out;
}

std::uint32_t parse_count(const std::string& text, const char* option, std::uint32_t max, const char* what) {
  try {
    std::size_t pos = 0;
    long v = std::stol(text, &pos);
    if (pos != text.size() || v < 1 || v > static_cast<long>(max)) throw std::invalid_argument(text);
    return static_cast<std::uint32_t>(v);
  } catch (const std::exception&) {
    throw InputError(std::string(option) + " " + text + ": expected a number of " + what + " (1 .. " + std::to_string(max) + ")");
  }
}

Bytes companion_bytes(const CompanionArgs& a, const char* name, Bytes dflt) {
  const std::string* b = a.find(name);
  if (!b) return dflt;
  try {
    Bytes x = parse_bytes(*b);
    if (x == 0) throw InputError("must be positive");
    return x;
  } catch (const std::exception& e) { throw InputError("--" + std::string(name) + " " + *b + ": " + e.what()); }
}

Scaling companion_scaling(const CompanionArgs& a, Scaling dflt) {
  const std::string* s = a.find("scaling");
  if (!s) return dflt;
  if (*s != "weak" && *s != "strong")
    throw InputError("--scaling " + *s + ": expected weak (the per-GPU batch fixed) or strong (the global batch fixed)");
  return *s == "strong" ? Scaling::Strong : Scaling::Weak;
}

std::size_t rescale_kernels(const WhatIfContext& ctx, WhatIfCase& c, const std::vector<OpId>& ops, double factor, TimeNs& before,
                            TimeNs& after) {
  const Trace& t = ctx.trace;
  std::size_t n = 0;
  for (OpId k : ops) {
    if (t.ops[k].kind != OpKind::Kernel || (t.ops[k].flags & Op::kFlagNccl)) continue;
    const TimeNs d = c.durations[k], nd = retime_by_work(t, k, ctx.work[k], d, c.spec, factor, factor, factor);
    before += d;
    after += nd;
    c.durations[k] = nd;
    ++n;
  }
  return n;
}

std::string replica_scaling_line(Scaling s, std::uint32_t n, TimeNs before, TimeNs after) {
  const std::string ns = std::to_string(n);
  return s == Scaling::Strong
             ? "strong scaling: the global batch is the traced one, each GPU computes 1/" + ns + " (" + format_duration(before) + " -> " +
                   format_duration(after) + ")"
             : "weak scaling: every GPU keeps the traced batch (the global batch is " + ns + " times it; scaling=strong keeps it)";
}

double step_gemm_weights(const WhatIfContext& ctx, const std::function<bool(OpId)>& keep) {
  const Trace& t = ctx.trace;
  double weights = 0;
  RangeIndex idx(t);
  std::vector<OpId> dev;
  for (std::size_t r = 0; r < t.ranges.size() && weights == 0; ++r) {
    if (t.ranges[r].depth != 0) continue;
    dev.clear();
    idx.device_ops(r, dev);
    for (OpId o : dev)
      if (keep(o) && ctx.work[o].cls == KernelClass::Gemm && ctx.work[o].batch <= 1)
        weights += ctx.work[o].rhs_elems * dtype_bytes(ctx.work[o].dtype);
  }
  return weights;
}

LaneId add_comm_lane(GraphEditor& ed, std::uint32_t device, std::uint32_t process, std::string name) {
  GraphLane gl;
  gl.kind = LaneKind::Stream;
  gl.device = device;
  gl.process = process;
  gl.name = std::move(name);
  return ed.add_lane(gl);
}

NodeId add_comm_node(GraphEditor& ed, LaneId lane, std::string name, TimeNs d) {
  NewNode nn;
  nn.name = std::move(name);
  nn.kind = OpKind::Kernel;
  nn.lane = lane;
  nn.source = DurationSource::Fixed;
  nn.fixed_ns = d;
  nn.nccl = true;
  return ed.add_node(nn);
}

const TransformDef* find_transform(const std::string& name) {
  for (const TransformDef* d : transform_registry())
    if (norm(d->name) == norm(name)) return d;
  return nullptr;
}

Transform parse_transform(const std::string& name, const std::string& arg) {
  const TransformDef* d = find_transform(name);
  if (!d) {
    std::string names;
    for (const TransformDef* t : transform_registry()) names += (names.empty() ? "" : ", ") + std::string(t->name);
    throw InputError("unknown transform '" + name + "' (" + names + ")");
  }
  if (d->arg == TransformDef::Arg::Required && arg.empty()) throw InputError("--" + std::string(d->name) + " needs " + d->metavar);
  std::unique_ptr<TransformStep> step = d->parse(arg);
  std::string shown = arg;
  for (std::size_t p = shown.find('\n'); p != std::string::npos; p = shown.find('\n', p)) shown.replace(p, 1, " --");
  step->text = "--" + std::string(d->name) + (shown.empty() ? "" : " " + shown);
  return Transform(std::move(step));
}

std::string transform_help(bool markdown) {
  std::string out;
  for (const TransformDef* d : transform_registry()) {
    std::string opt = "--" + std::string(d->name);
    if (d->arg == TransformDef::Arg::Required)
      opt += " " + std::string(d->metavar);
    else if (d->arg == TransformDef::Arg::Optional)
      opt += "[=" + std::string(d->metavar) + "]";
    if (markdown)
      out += "- `" + opt + "`: " + d->help + "\n";
    else
      out += "  " + opt + std::string(opt.size() < 28 ? 28 - opt.size() : 1, ' ') + d->help + "\n";
    for (const char* const* c = d->companions; c && *c; ++c) {
      std::string text(*c), name = companion_name(*c), rest = text.substr(text.find('=') + 1);
      std::string meta = rest.substr(0, rest.find(':')), help = rest.find(':') == std::string::npos ? "" : rest.substr(rest.find(':') + 2);
      std::string sub = "--" + name + " " + meta;
      if (markdown)
        out += "  - `" + sub + "` (with `" + opt.substr(0, opt.find(' ')) + "`): " + help + "\n";
      else
        out += "    " + sub + std::string(sub.size() < 26 ? 26 - sub.size() : 1, ' ') + help + "\n";
    }
  }
  return out;
}

Scenario load_scenario(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw InputError(path, "is a directory, not a scenario");
  std::ifstream in(path);
  if (!in) throw InputError(path, "cannot open scenario");
  nlohmann::json j = parse_json_input(in, path);
  Scenario s;
  if (!j.is_object() || !j.contains("transforms") || !j["transforms"].is_array())
    throw InputError(path, "a scenario is {\"name\": ..., \"transforms\": [{\"scale\": \"2:name~gemm\"}, ...]}");
  s.name = j.contains("name") && j["name"].is_string() ? j["name"].get<std::string>() : path;
  for (std::size_t i = 0; i < j["transforms"].size(); ++i) {
    const auto& t = j["transforms"][i];
    const std::string where = "transforms[" + std::to_string(i) + "]";
    if (!t.is_object() || t.empty()) throw InputError(path, where + ": one {kind: argument} per entry");
    auto value = [&](const nlohmann::json& v) -> std::string {
      if (v.is_string()) return v.get<std::string>();
      if (v.is_boolean() && v.get<bool>()) return "";
      if (v.is_number_integer()) return std::to_string(v.get<long long>());
      throw InputError(path, where + ": the argument must be a string");
    };
    // The one transform key, and its companions beside it ({"tensor-parallel": 2, "tp-comm": "..."}).
    const TransformDef* d = nullptr;
    std::string key;
    for (auto it = t.begin(); it != t.end(); ++it)
      if (const TransformDef* f = find_transform(it.key())) {
        if (d) throw InputError(path, where + ": one {kind: argument} per entry ('" + key + "' and '" + it.key() + "')");
        d = f;
        key = it.key();
      }
    if (!d) throw InputError(path, where + ": unknown transform '" + t.begin().key() + "'");
    std::string arg = value(t[key]);
    for (auto it = t.begin(); it != t.end(); ++it) {
      if (it.key() == key) continue;
      if (!companion_of(d, it.key()))
        throw InputError(path, where + ": '" + it.key() + "' is neither a transform nor an option of '" + key + "'");
      arg.append(1, '\n').append(companion_name(companion_of(d, it.key()))).append(1, '=').append(value(it.value()));
    }
    try {
      s.transforms.push_back(parse_transform(key, arg));
    } catch (const InputError& e) { throw InputError(path, where + ": " + e.what()); }
  }
  return s;
}

TimeNs retime_by_work(const Trace& t, OpId i, const KernelWork& w, TimeNs d, const HwSpec& spec, double flops_factor, double bytes_factor,
                      double grid_factor, double rows_factor, bool fixed_excess) {
  KernelWork w2 = w;
  if (rows_factor != 1 && w2.out_rows > 0) (w2.batch > 1 ? w2.batch : w2.out_rows) *= rows_factor;
  w2.flops *= flops_factor;
  w2.bytes *= bytes_factor;
  if (w2.read_bytes > 0) w2.read_bytes *= bytes_factor;
  if (w2.out_elems > 0) w2.out_elems *= bytes_factor;
  if (w2.tiles > 0) w2.tiles = std::max(1.0, std::ceil(w2.tiles * grid_factor));
  const LaunchConfig* lc = t.launch(t.ops[i]);
  LaunchConfig l2;
  if (lc) {
    l2 = *lc;
    const std::uint64_t blocks = std::uint64_t{lc->grid(0)} * lc->grid(1) * lc->grid(2);
    const int dim = lc->grid(0) >= lc->grid(1) ? (lc->grid(0) >= lc->grid(2) ? 0 : 2) : (lc->grid(1) >= lc->grid(2) ? 1 : 2);
    const bool fewer = grid_factor < 1 && blocks > spec.gpu.sm_count;
    const bool more = grid_factor > 1 && blocks > 1 && blocks != spec.gpu.sm_count;
    if (fewer || more)
      l2.set_grid(dim, std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::ceil(static_cast<double>(lc->grid(dim)) * grid_factor))));
  }
  const double whole = static_cast<double>(model_kernel(lc, w, spec).time_ns);
  const double part = static_cast<double>(model_kernel(lc ? &l2 : nullptr, w2, spec).time_ns);
  if (whole <= 0) return d;
  // A kernel within 1.25x of its model: the difference is its rate (it scales); beyond, the
  // excess is fixed time (fitted on validate/reference/h200/batch's BERT-base and GPT-2 medium).
  constexpr double kFixedBeyond = 1.25;
  if (fixed_excess && static_cast<double>(d) > whole * kFixedBeyond)
    return static_cast<TimeNs>(std::llround(part + (static_cast<double>(d) - whole)));
  return static_cast<TimeNs>(std::llround(static_cast<double>(d) * part / whole));
}

std::vector<Transform> parse_transform_args(const std::vector<std::string>& args, std::string& scenario_name) {
  std::vector<Transform> out;
  // A companion option given before its transform (`--step-range R --steps 50 --cfg off`) applies
  // to every later transform that takes it.
  std::vector<std::pair<std::string, std::string>> pending;
  std::vector<bool> used;
  auto shared_companion = [](const std::string& name) {
    for (const TransformDef* t : transform_registry())
      if (companion_of(t, name)) return true;
    return false;
  };
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i], val;
    bool has_val = false;
    if (auto eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
      val = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_val = true;
    }
    auto next = [&]() -> std::string {
      if (has_val) return val;
      if (i + 1 >= args.size()) throw InputError(a + " needs a value");
      return args[++i];
    };
    if (a == "--scenario") {
      const std::string path = next();
      Scenario s = load_scenario(path);
      if (s.transforms.empty())
        throw InputError(path, "the scenario lists no transforms (\"transforms\": [{\"scale\": \"2:name~gemm\"}, ...])");
      scenario_name += (scenario_name.empty() ? "" : "+") + s.name;
      out.insert(out.end(), s.transforms.begin(), s.transforms.end());
      continue;
    }
    const TransformDef* d = a.rfind("--", 0) == 0 ? find_transform(a.substr(2)) : nullptr;
    if (!d && a.rfind("--", 0) == 0 && shared_companion(a.substr(2))) {
      pending.emplace_back(a.substr(2), next());
      used.push_back(false);
      continue;
    }
    if (!d)
      throw InputError("whatif: unknown option or stray argument '" + args[i] +
                       "' (TRACE comes first; `bneck whatif --list-transforms` lists the transforms)");
    std::string arg = d->arg == TransformDef::Arg::Required ? next() : (has_val ? val : "");
    // Its companion options, as long as they follow it.
    while (i + 1 < args.size() && args[i + 1].rfind("--", 0) == 0) {
      std::string c = args[i + 1].substr(2), cval;
      bool inline_val = false;
      if (auto eq = c.find('='); eq != std::string::npos) {
        cval = c.substr(eq + 1);
        c = c.substr(0, eq);
        inline_val = true;
      }
      const char* comp = companion_of(d, c);
      if (!comp) break;
      ++i;
      if (!inline_val) {
        if (i + 1 >= args.size()) throw InputError("--" + c + " needs a value");
        cval = args[++i];
      }
      arg.append(1, '\n').append(companion_name(comp)).append(1, '=').append(cval);
    }
    for (std::size_t k = 0; k < pending.size(); ++k)
      if (const char* comp = companion_of(d, pending[k].first)) {
        used[k] = true;
        if (split_companions(arg).find(companion_name(comp)) == nullptr)
          arg.append(1, '\n').append(companion_name(comp)).append(1, '=').append(pending[k].second);
      }
    out.push_back(parse_transform(d->name, arg));
  }
  for (std::size_t k = 0; k < pending.size(); ++k)
    if (!used[k]) {
      std::string owners;
      for (const TransformDef* t : transform_registry())
        if (companion_of(t, pending[k].first)) owners += (owners.empty() ? "--" : " or --") + std::string(t->name);
      throw InputError("--" + pending[k].first + " goes with " + owners + ", which is not given after it");
    }
  return out;
}

WhatIfEngine::WhatIfEngine(const Trace& t, std::shared_ptr<const Graph> base, HwSpec source, WorkTable work)
    : ctx_{t, std::move(base), std::move(source), std::move(work)} {
  if (ctx_.work.size() != t.ops.size()) ctx_.work = estimate_work(t, ctx_.source);
  find_blocked_launches();
}

// Launch-queue backpressure. The driver queues at most Q launches per device (about 1024): when the
// host runs that far ahead of the GPU, each launch call waits until the kernel launched Q calls
// earlier completes, and the host's time (inside the calls and between them) is the GPU's pace,
// not its own. Kept as measured, that pace would stay whatever a what-if does to the GPU. So, on
// a device whose trace shows a full queue (the most work in flight, launched and not ended, is 512
// or more: the driver's queue held 1022 on the H200 here), each launch made at that level gets an end-to-end edge from the device op
// launched Q calls before it (delay: the measured gap, so replaying the measurement is unchanged),
// and the host's time on that thread while the queue was full (call durations, and the CPU time
// between calls) is scaled to the thread's own pace: its mean time per launch while the queue was
// not full over its mean time per launch while it was (no scaling if it never was not full).
void WhatIfEngine::find_blocked_launches() {
  const Trace& t = ctx_.trace;
  std::vector<std::uint32_t> dev_of(t.ops.size(), kNone);
  std::vector<OpId> launched_op(t.ops.size(), kNone);
  std::map<std::uint32_t, std::vector<TimeNs>> ends;
  std::map<std::uint32_t, std::vector<std::pair<TimeNs, OpId>>> by_launch;  // per device: (launch start, device op)
  for (OpId i = 0; i < t.ops.size(); ++i) {
    const Op& o = t.ops[i];
    if (o.kind == OpKind::Api || o.lane >= t.lanes.size() || o.link == kNone || o.link >= t.ops.size()) continue;
    const std::uint32_t d = t.lanes[o.lane].device;
    dev_of[o.link] = d;
    launched_op[o.link] = i;
    ends[d].push_back(o.end());
    by_launch[d].emplace_back(t.ops[o.link].start, i);
  }
  if (ends.empty()) return;
  for (auto& [d, v] : ends) std::sort(v.begin(), v.end());
  for (auto& [d, v] : by_launch) std::sort(v.begin(), v.end());
  auto in_flight = [&](std::uint32_t d, TimeNs x) {
    const auto& l = by_launch[d];
    const auto& e = ends[d];
    const auto nl = std::lower_bound(l.begin(), l.end(), std::make_pair(x, OpId{0})) - l.begin();
    const auto ne = std::upper_bound(e.begin(), e.end(), x) - e.begin();
    return static_cast<std::int64_t>(nl) - static_cast<std::int64_t>(ne);
  };
  std::map<std::uint32_t, std::int64_t> most;
  for (OpId i = 0; i < t.ops.size(); ++i)
    if (dev_of[i] != kNone) most[dev_of[i]] = std::max(most[dev_of[i]], in_flight(dev_of[i], t.ops[i].start));
  std::vector<bool> full(t.ops.size(), false);
  std::size_t nfull = 0;
  for (OpId i = 0; i < t.ops.size(); ++i) {
    const std::uint32_t d = dev_of[i];
    if (d == kNone || most[d] < 512) continue;
    full[i] = in_flight(d, t.ops[i].start) >= most[d] * 98 / 100;
    nfull += full[i];
  }
  if (nfull == 0) return;
  auto g = std::make_shared<Graph>(*ctx_.base);
  GraphEditor ed(*g, "launch-queue backpressure");
  for (auto& [d, v] : by_launch) {
    const std::size_t q = static_cast<std::size_t>(most[d]);
    for (std::size_t k = q; k < v.size(); ++k) {
      const OpId dop = v[k].second, call = t.ops[dop].link;
      if (!full[call]) continue;
      const OpId src = v[k - q].second;
      ed.add_edge(src, call, EdgeType::Event, DepType::EndToEnd, t.ops[call].end() - t.ops[src].end());
    }
  }
  ed.commit();
  // The thread's own pace: mean time per launch (start to next launch start) while not full / while full.
  std::map<LaneId, std::array<double, 4>> pace;  // not-full sum, count, full sum, count
  std::map<LaneId, OpId> prev;
  for (OpId i = 0; i < t.ops.size(); ++i) {
    if (dev_of[i] == kNone) continue;
    const Op& o = t.ops[i];
    auto it = prev.find(o.lane);
    if (it != prev.end()) {
      auto& p = pace[o.lane];
      const double dt = static_cast<double>(o.start - t.ops[it->second].start);
      const int base = full[i] && full[it->second] ? 2 : (!full[i] && !full[it->second] ? 0 : -1);
      if (base >= 0) p[base] += dt, p[base + 1] += 1;
    }
    prev[o.lane] = i;
  }
  std::map<LaneId, double> ratio;
  for (auto& [l, p] : pace)
    if (p[1] >= 16 && p[3] >= 16) ratio[l] = std::min(1.0, (p[0] / p[1]) / (p[2] / p[3]));
  // Host calls between two full-queue launches on a thread with a known pace: their durations and
  // the CPU time before them scale by the ratio.
  std::map<LaneId, OpId> last_full;
  std::vector<bool> scale(t.ops.size(), false);
  std::map<LaneId, std::vector<OpId>> since;
  for (OpId i = 0; i < t.ops.size(); ++i) {
    const Op& o = t.ops[i];
    if (o.kind != OpKind::Api || !ratio.count(o.lane)) continue;
    auto& pend = since[o.lane];
    pend.push_back(i);
    if (dev_of[i] == kNone) continue;
    if (full[i] && last_full.count(o.lane))
      for (OpId p : pend) scale[p] = true;
    pend.clear();
    if (full[i])
      last_full[o.lane] = i;
    else
      last_full.erase(o.lane);
  }
  std::size_t scaled = 0;
  for (OpId u = 0; u < boost::num_vertices(g->csr); ++u)
    for (auto e : boost::make_iterator_range(boost::out_edges(u, g->csr))) {
      const OpId v = static_cast<OpId>(boost::target(e, g->csr));
      if (v < t.ops.size() && scale[v] && g->csr[e].type() == EdgeType::HostOrder)
        g->csr[e].set_delay(static_cast<TimeNs>(std::llround(static_cast<double>(g->csr[e].delay()) * ratio[t.ops[v].lane])));
    }
  for (OpId i = 0; i < t.ops.size(); ++i)
    if (scale[i]) {
      unblocked_.emplace_back(i, static_cast<TimeNs>(std::llround(static_cast<double>(t.ops[i].duration()) * ratio[t.ops[i].lane])));
      ++scaled;
    }
  ctx_.base = std::move(g);
  std::string r;
  for (auto& [l, x] : ratio) r += (r.empty() ? "" : ", ") + fmt_num("%.2f", x);
  blocked_note_ = std::to_string(nfull) + " launches found the launch queue full (" + std::to_string(most.begin()->second) +
                  " in flight): each waits for the kernel launched that many before it; the host's time there scaled to its own pace (x " +
                  (r.empty() ? std::string("1: never seen") : r) + ", " + std::to_string(scaled) + " calls)";
}

WhatIfCase WhatIfEngine::baseline() const {
  WhatIfCase c;
  c.graph = ctx_.base;
  c.spec = ctx_.source;
  c.durations.resize(ctx_.trace.ops.size());
  MeasuredCostModel m;
  for (OpId i = 0; i < ctx_.trace.ops.size(); ++i) c.durations[i] = m.duration(i, *ctx_.base);
  return c;
}

WhatIfCase WhatIfEngine::apply(const std::vector<Transform>& transforms) const { return resume(prefix(transforms), {}); }

WhatIfCase WhatIfEngine::prefix(const std::vector<Transform>& first) const {
  WhatIfCase c = baseline();
  for (const auto& [op, d] : unblocked_) c.durations[op] = std::min(c.durations[op], d);  // the host's own pace
  if (!blocked_note_.empty() && !first.empty()) c.log.push_back(blocked_note_);
  for (const Transform& tr : first) tr->apply(ctx_, c);
  return c;
}

WhatIfCase WhatIfEngine::resume(WhatIfCase c, const std::vector<Transform>& rest) const {
  for (const Transform& tr : rest) tr->apply(ctx_, c);
  slowest_host_of_ranks(ctx_.trace, c);
  return c;
}

}  // namespace bneck
