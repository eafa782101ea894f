// The steps an engine's own profiler annotations name (vLLM, SGLang, bneck's serving ranges): their
// shapes, device ops and launch mode.
#include <algorithm>
#include <cstdio>
#include <set>
#include <tuple>

#include "models/serving/calibrate_steps.hpp"

namespace bneck::serve {

using calibration::parse_shape;

namespace {

// vLLM's and SGLang's step names: the shape, or false.
bool parse_engine_step(const std::string& n, NamedStep& s) {
  long long tok = 0, c = 0, cq = 0, ck = 0, cqq = 0, cqk = 0, g = 0, gq = 0, gk = 0, gqq = 0, gqk = 0;
  StepShape& sh = s.shape;
  if (std::sscanf(n.c_str(), "execute_%lld_context_%lld(sq%lldsk%lldsqsq%lldsqsk%lld)_generation_%lld(sq%lldsk%lldsqsq%lldsqsk%lld)", &tok,
                  &c, &cq, &ck, &cqq, &cqk, &g, &gq, &gk, &gqq, &gqk) == 11) {
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
      if (is_device_op(op.kind) && op.link != kNone && op.link < trace.ops.size())
        launched.push_back({trace.ops[op.link].lane, trace.ops[op.link].start, i});
    }
  std::sort(launched.begin(), launched.end());
  for (std::size_t i = 0; i < out.steps.size(); ++i) {
    NamedStep& s = out.steps[i];
    const Range& r = trace.ranges[range_of[i]];
    TimeNs first = -1, last = -1;
    std::set<std::uint32_t> apis;
    for (auto it = std::lower_bound(launched.begin(), launched.end(), Launched{r.lane, r.start, 0});
         it != launched.end() && it->lane == r.lane && it->at < r.end; ++it) {
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
