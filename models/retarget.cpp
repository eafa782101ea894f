#include "models/retarget.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <unordered_map>

#include "hw/from_device.hpp"
#include "models/collective.hpp"
#include "models/occupancy.hpp"
#include "models/transfer.hpp"
#include "sim/base/error.hpp"
#include "sim/base/strings.hpp"

namespace bneck {

const char* to_string(DurationMode m) {
  static const char* const names[] = {"measured", "model", "hybrid"};
  return names[static_cast<int>(m)];
}

TimeNs model_device_op(const Trace& t, OpId i, const KernelWork& w, const HwSpec& hw) {
  const Op& o = t.ops[i];
  if (o.kind == OpKind::Kernel) return model_kernel(t, i, w, hw).time_ns;
  const CopyInfo* ci = t.copy(o);
  Bytes b = ci ? ci->bytes : 0;
  if (o.kind == OpKind::Memset) return memset_time(hw, b);
  return transfer_time(hw, ci ? ci->copy_kind : MemcpyKind::Unknown, ci ? ci->src : MemKind::Unknown, ci ? ci->dst : MemKind::Unknown, b);
}

RetargetCostModel::RetargetCostModel(const Trace& t, HwSpec source, HwSpec target, DurationMode mode)
    : RetargetCostModel(t, source, std::move(target), mode, estimate_work(t, source)) {}

RetargetCostModel::RetargetCostModel(const Trace& t, HwSpec source, HwSpec target, DurationMode mode, WorkTable work)
    : RetargetCostModel(t, std::move(source), std::move(target), mode, [&] {
        work.resize(t.ops.size());
        return std::make_shared<const WorkTable>(std::move(work));
      }()) {}

RetargetCostModel::RetargetCostModel(const Trace& t, HwSpec source, HwSpec target, DurationMode mode, std::shared_ptr<const WorkTable> work)
    : t_(t), source_(std::move(source)), target_(std::move(target)), mode_(mode), work_(std::move(work)) {
  if (!work_ || work_->size() != t.ops.size()) throw std::logic_error("RetargetCostModel: work of another trace");
  times_.assign(t.ops.size(), 0);
  same_chip_ = same_chip(source_.gpu, target_.gpu);
  if (same_chip_) {
    same_chip_target_ = target_;
    same_chip_target_.gpu.gemm_fit = source_.gpu.gemm_fit;
    same_chip_target_.gpu.gemm_samples = source_.gpu.gemm_samples;
    same_chip_target_.gpu.gemm_samples_unaligned = source_.gpu.gemm_samples_unaligned;
  }
  if (mode_ != DurationMode::Measured)
    for (const Collective& c : t.collectives) {
      TimeNs tgt = collective_time(target_, c.kind, c.bytes, c.ranks()).time_ns;
      TimeNs src = collective_time(source_, c.kind, c.bytes, c.ranks()).time_ns;
      for (OpId m : c.members) {
        coll_model_[m] = tgt;
        coll_ratio_[m] = src > 0 ? static_cast<double>(tgt) / static_cast<double>(src) : 1.0;
      }
    }
  for (OpId i = 0; i < t.ops.size(); ++i) {
    const Op& o = t.ops[i];
    if (!is_device_op(o.kind)) continue;
    if (o.flags & Op::kFlagNccl) {
      auto r = coll_ratio_.find(i);
      times_[i] = mode_ == DurationMode::Hybrid && r != coll_ratio_.end()
                      ? static_cast<TimeNs>(std::llround(static_cast<double>(o.duration()) * r->second))
                      : o.duration();
      continue;
    }
    if (mode_ == DurationMode::Measured) {
      times_[i] = o.duration();
      continue;
    }
    // A GEMM the target measured at this shape: its time there, not the source's scaled (the
    // source's kernel choice, tiles and waves do not carry over); unless the target is the
    // source's chip (same_chip): then the trace's kernels are the target's too, re-timed by the
    // model with the source's GEMM efficiencies on both sides (what differs is memory).
    const bool gemm = (*work_)[i].cls == KernelClass::Gemm;
    TimeNs tgt = model_device_op(t, i, (*work_)[i], same_chip_ && gemm ? same_chip_target_ : target_);
    if (mode_ == DurationMode::Model || (!same_chip_ && gemm_efficiency_by_shape((*work_)[i], target_.gpu))) {
      times_[i] = tgt;
    } else {
      TimeNs src = model_device_op(t, i, (*work_)[i], source_);
      times_[i] =
          src > 0
              ? static_cast<TimeNs>(std::llround(static_cast<double>(o.duration()) * static_cast<double>(tgt) / static_cast<double>(src)))
              : o.duration();
    }
  }
}

std::vector<std::string> RetargetCostModel::assumptions() const {
  std::vector<std::string> out;
  if (mode_ == DurationMode::Measured) return out;
  std::map<std::pair<Dtype, ComputeUnit>, std::pair<std::size_t, TimeNs>> used;  // kernels, measured time
  for (OpId i = 0; i < t_.ops.size() && i < work_->size(); ++i) {
    const Op& o = t_.ops[i];
    if (o.kind != OpKind::Kernel || (o.flags & Op::kFlagNccl) || !is_compute_class((*work_)[i].cls)) continue;
    auto& u = used[{(*work_)[i].dtype, (*work_)[i].unit}];
    ++u.first;
    u.second += o.duration();
  }
  const GpuSpec& g = target_.gpu;
  std::size_t by_shape = 0, gemms = 0;
  TimeNs by_shape_time = 0;
  for (OpId i = 0; i < t_.ops.size() && i < work_->size(); ++i) {
    if (t_.ops[i].kind != OpKind::Kernel || (*work_)[i].cls != KernelClass::Gemm) continue;
    ++gemms;
    if (gemm_efficiency_by_shape((*work_)[i], g)) ++by_shape, by_shape_time += t_.ops[i].duration();
  }
  if (same_chip_ && gemms > 0)
    out.push_back(std::to_string(gemms) + " GEMM kernels keep the trace's: " + target_.name + " is its GPU's chip (" +
                  std::to_string(g.sm_count) + " SMs at " + std::to_string(static_cast<int>(std::lround(g.clock_hz / 1e6))) +
                  " MHz, the same FP32 rate)");
  if (by_shape > 0 && !same_chip_) {
    std::string line = std::to_string(by_shape) + " of " + std::to_string(gemms) + " GEMM kernels (" + format_duration(by_shape_time) +
                       " measured) timed from " + target_.name + "'s measured GEMMs of the nearest shapes";
    out.push_back(line);
  }
  if (!g.held_out_error.empty()) {
    std::string line =
        "error bar (median |error| of " + target_.name + "'s kernel model on held-out kernels, whole models on released ones):";
    const char* sep = " ";
    for (const auto& [cls, e] : g.held_out_error) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%s%s %.1f %%", sep, cls.c_str(), e * 100);
      line += buf;
      sep = ", ";
    }
    out.push_back(line);
  }
  for (const auto& [key, n] : used) {
    const auto [dtype, unit] = key;
    if (g.peak_of(dtype, unit) > 0) continue;
    std::string instead =
        g.peak_of(dtype, ComputeUnit::Simt) > 0 ? std::string(to_string(dtype)) + " on SIMT cores" : "FP32 on SIMT cores (emulated)";
    out.push_back(std::to_string(n.first) + " " + to_string(dtype) + " " + to_string(unit) + " kernels (" + format_duration(n.second) +
                  " measured): " + target_.name + " has no " + to_string(dtype) + " " + to_string(unit) + " rate; timed as " + instead);
  }
  return out;
}

bool same_chip(const GpuSpec& a, const GpuSpec& b) {
  return a.sm_count > 0 && a.sm_count == b.sm_count && a.clock_hz == b.clock_hz &&
         a.peak_of(Dtype::FP32, ComputeUnit::Simt) == b.peak_of(Dtype::FP32, ComputeUnit::Simt);
}

TimeNs RetargetCostModel::duration(OpId n, const Graph& g) const {
  const Op& o = g.trace->ops[n];
  if (is_device_op(o.kind) && !(o.flags & Op::kFlagNccl)) {
    // Hybrid scales what was measured: an op that overlapped others, its time alone.
    if (mode_ == DurationMode::Hybrid && o.duration() > 0)
      if (TimeNs lost = g.lost_to_sharing(n))
        return static_cast<TimeNs>(
            std::llround(static_cast<double>(times_[n]) * static_cast<double>(std::max<TimeNs>(0, o.duration() - lost)) /
                         static_cast<double>(o.duration())));
    return times_[n];
  }
  if (o.flags & Op::kFlagNccl) {
    // The part after the last member arrived (measured), or the collective model's.
    TimeNs base = o.duration();
    if (const TimeNs* in = g.intrinsic.find(n)) base = *in;
    if (mode_ == DurationMode::Model) {
      auto m = coll_model_.find(n);
      return m != coll_model_.end() ? m->second : base;
    }
    if (mode_ == DurationMode::Hybrid) {
      auto r = coll_ratio_.find(n);
      if (r != coll_ratio_.end()) return static_cast<TimeNs>(std::llround(static_cast<double>(base) * r->second));
    }
    return base;
  }
  if (const TimeNs* in = g.intrinsic.find(n)) return *in;
  return o.duration();
}

std::string unnamed_device_part(const Trace& t, const Device& d) {
  // ROCm names a part it does not know by the generic "AMD Radeon Graphics" (an MI250's GCD in
  // HTA's ROCm 6.2 profile): the name says AMD, the properties say which.
  if (ascii_lower(d.name) == "amd radeon graphics")
    return amd_part_from_properties(d.sm_count, static_cast<int>(d.cc_major), static_cast<int>(d.cc_minor));
  if (!d.name.empty()) return "";
  std::size_t seen = 0;
  for (const Op& o : t.ops)
    if (o.kind == OpKind::Api) {
      if (t.name(o).rfind("hip", 0) == 0)
        return amd_part_from_properties(d.sm_count, static_cast<int>(d.cc_major), static_cast<int>(d.cc_minor));
      if (++seen == 1000) break;
    }
  return "";
}

HwSpec source_spec(const Trace& t, const std::string& override_spec) {
  if (!override_spec.empty()) return load_hw(override_spec);
  for (const auto& d : t.devices) {
    std::string p = preset_for_device(d.name);
    if (!p.empty()) return load_hw(p);
  }
  // No preset: the properties the trace records, beside the architecture's rates. A device a ROCm
  // profile leaves unnamed (HIP runtime calls) is the AMD part its CUs and gfx version tell.
  for (const auto& d : t.devices) {
    std::string why, name = d.name;
    const std::string inferred = unnamed_device_part(t, d);
    if (!inferred.empty()) name = inferred;
    const nlohmann::json spec = spec_from_trace_device(name, d.sm_count, static_cast<int>(d.cc_major), static_cast<int>(d.cc_minor),
                                                       static_cast<double>(d.memory_bytes), d.clock_hz, why);
    if (spec.is_null()) continue;
    HwSpec h = load_hw_json(spec, t.source);
    if (!inferred.empty())
      why = (d.name.empty() ? std::string("the trace names no GPU; its ")
                            : "the trace names the GPU '" + d.name + "' (ROCm's generic name); its ") +
            std::to_string(d.sm_count) + " CUs, gfx" + std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor) +
            (d.name.empty() ? " and HIP runtime" : "") + " are an " + inferred + "'s" +
            (inferred == "AMD Instinct MI210" ? " (or one die of an MI250: the same CUs and bandwidth a die)" : "") + ". " + why;
    h.from_trace = why;
    remember_trace_spec(h);
    return h;
  }
  // No name and no properties (a profile older than deviceProperties): the architecture its
  // kernels were built for, where cuBLAS and cuDNN name it (volta_sgemm_..., sm80_xmma_...,
  // nvjet_sm90_...), and that generation's common data-center part, said as a guess.
  if (named_device(t).empty())
    if (std::string why, preset = preset_from_kernel_names(t, why); !preset.empty()) {
      HwSpec h = load_hw(preset);
      h.from_trace = why;
      return h;
    }
  throw InputError(t.source, "which GPU ran it? (device '" + (t.devices.empty() ? std::string("?") : t.devices[0].name) +
                                 "', no preset): --source-hw SPEC");
}

std::string named_device(const Trace& t) {
  std::string device;
  for (const auto& d : t.devices)
    if (!d.name.empty()) device = d.name;
  return device;
}

std::string preset_from_kernel_names(const Trace& t, std::string& why) {
  struct Arch {
    const char* tokens[3];
    const char* arch;
    const char* preset;
    const char* part;
  };
  static const Arch archs[] = {
      {{"volta_", "sm70_", nullptr}, "Volta (sm_70)", "v100-sxm2", "a V100 SXM2"},
      {{"turing_", "sm75_", nullptr}, "Turing (sm_75)", "t4", "a T4"},
      {{"ampere_", "sm80_", nullptr}, "Ampere (sm_80)", "a100-sxm-80gb", "an A100 SXM 80 GB"},
      {{"sm86_", nullptr, nullptr}, "Ampere (sm_86)", "a10", "an A10"},
      {{"sm89_", nullptr, nullptr}, "Ada (sm_89)", "l40s", "an L40S"},
      {{"sm90_", "sm90a_", nullptr}, "Hopper (sm_90)", "h100-sxm", "an H100 SXM"},
      {{"sm100_", "sm100a_", nullptr}, "Blackwell (sm_100)", "b200", "a B200"},
  };
  constexpr std::size_t kArchs = sizeof(archs) / sizeof(archs[0]);
  std::size_t count[kArchs] = {}, kernels = 0;
  std::unordered_map<StrId, int> of_name;  // by kernel name: its architecture (-1: none)
  for (const Op& o : t.ops) {
    if (o.kind != OpKind::Kernel) continue;
    ++kernels;
    auto [it, fresh] = of_name.emplace(o.name, -1);
    if (fresh) {
      std::string n = ascii_lower(t.name(o));
      if (n.rfind("void ", 0) == 0) n.erase(0, 5);
      for (std::size_t a = 0; a < kArchs && it->second < 0; ++a)
        for (const char* tok : archs[a].tokens)
          if (tok && (n.rfind(tok, 0) == 0 || n.find(std::string("_") + tok) != std::string::npos)) it->second = static_cast<int>(a);
    }
    if (it->second >= 0) ++count[it->second];
  }
  const std::size_t best = static_cast<std::size_t>(std::max_element(count, count + kArchs) - count);
  if (count[best] == 0) return "";
  why = "the trace names no GPU; " + std::to_string(count[best]) + " of its " + std::to_string(kernels) + " kernels are built for " +
        archs[best].arch + " (cuBLAS / cuDNN kernel names): " + archs[best].part +
        "'s rates assumed, a guess (--source-hw SPEC gives the real one)";
  return archs[best].preset;
}

}  // namespace bneck
