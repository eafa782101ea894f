#include "hw/from_device.hpp"

#include <cctype>
#include <cmath>
#include <string>

#include "sim/base/error.hpp"
#include "sim/base/strings.hpp"

namespace bneck {

namespace {

// Dense FLOPs per SM per clock by compute capability: SIMT FP64/FP32/FP16 and tensor FP64, TF32,
// FP16/BF16, FP8, INT8 (0: none). From datasheet peaks / (SMs x boost clock) of: V100 (7.0), T4
// (7.5), A100 (8.0), A10/RTX 3090 (8.6), L40S (8.9), H100 SXM (9.0), B200 (10.0), RTX 5090 (12.0).
struct Rates {
  double fp64, fp32, fp16, t_fp64, t_tf32, t_fp16, t_fp8, t_int8;
};
struct ArchRates {
  int major, minor;
  const char* arch;
  Rates r;
};
constexpr ArchRates kArch[] = {
    {7, 0, "Volta", {64, 128, 256, 0, 0, 1024, 0, 0}},
    {7, 5, "Turing", {4, 128, 256, 0, 0, 1024, 0, 2048}},
    {8, 0, "Ampere (GA100)", {64, 128, 512, 128, 1024, 2048, 0, 4096}},
    {8, 6, "Ampere (GA10x)", {4, 256, 256, 0, 256, 512, 0, 2048}},
    {8, 9, "Ada Lovelace", {4, 256, 256, 0, 512, 1024, 2048, 2048}},
    {9, 0, "Hopper", {128, 256, 512, 256, 2048, 4096, 8192, 8192}},
    {10, 0, "Blackwell (datacenter)", {128, 256, 512, 128, 4096, 8192, 16384, 16384}},
    {12, 0, "Blackwell (client)", {4, 256, 256, 0, 512, 1024, 2048, 2048}},
};

std::string tflops(double flop_per_s) {
  char b[64];
  std::snprintf(b, sizeof b, "%.4g TFLOP/s", flop_per_s / 1e12);
  return b;
}

// A spec's "peak" object: the rates per SM (CU) and clock x `per` SM-clocks a second (0: none).
nlohmann::json peak_json(const Rates& r, double per) {
  nlohmann::json peak = nlohmann::json::object();
  auto put = [&](const char* dtype, const char* unit, double flop_per_clk) { peak[dtype][unit] = tflops(flop_per_clk * per); };
  put("fp64", "simt", r.fp64);
  put("fp64", "tensor", r.t_fp64);
  put("fp32", "simt", r.fp32);
  put("tf32", "tensor", r.t_tf32);
  put("bf16", "simt", r.fp16);
  put("bf16", "tensor", r.t_fp16);
  put("fp16", "simt", r.fp16);
  put("fp16", "tensor", r.t_fp16);
  put("fp8", "tensor", r.t_fp8);
  put("int8", "tensor", r.t_int8);
  return peak;
}

}  // namespace

std::string spec_slug(const std::string& device_name) {
  std::string s;
  for (char c : device_name) {
    if (std::isalnum(static_cast<unsigned char>(c)))
      s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (!s.empty() && s.back() != '-')
      s += '-';
  }
  while (!s.empty() && s.back() == '-') s.pop_back();
  return s.empty() ? "gpu" : s;
}

nlohmann::json spec_from_device(const nlohmann::json& d, const std::string& origin) {
  using nlohmann::json;
  auto num = [&](const char* k) { return d.contains(k) && d[k].is_number() ? d[k].get<double>() : 0.0; };
  if (!d.is_object() || !d.contains("name") || !d["name"].is_string() || num("sm_count") <= 0 || num("clock_khz") <= 0)
    throw InputError(origin, "device: needs name, sm_count and clock_khz to describe a GPU with no preset");
  const std::string name = d["name"].get<std::string>();
  int major = 0, minor = 0;
  if (d.contains("cc") && d["cc"].is_string()) std::sscanf(d["cc"].get<std::string>().c_str(), "%d.%d", &major, &minor);
  // The closest architecture at or below the device's compute capability (newer minor versions of
  // a major keep its rates).
  const ArchRates* a = &kArch[0];
  for (const auto& r : kArch)
    if (r.major < major || (r.major == major && r.minor <= minor)) a = &r;
  const double sms = num("sm_count"), clock = num("clock_khz") * 1e3;
  const double per = sms * clock;  // SM-clocks per second
  json gpu = {{"name", name}, {"sm_count", static_cast<int>(sms)}, {"clock", std::to_string(clock / 1e9) + " GHz"}};
  json src = json::object();
  const std::string prop = "device property (CUDA device attributes, recorded by bneck_validate)";
  src["gpu.name"] = src["gpu.sm_count"] = src["gpu.clock"] = prop;
  if (num("memory_bytes") > 0) {
    gpu["memory"] = std::to_string(static_cast<long long>(num("memory_bytes"))) + " B";
    src["gpu.memory"] = prop;
  }
  if (num("memory_clock_khz") > 0 && num("memory_bus_bits") > 0) {
    double bw = 2 * num("memory_clock_khz") * 1e3 * num("memory_bus_bits") / 8;  // double data rate
    gpu["memory_bandwidth"] = std::to_string(bw / 1e9) + " GB/s";
    src["gpu.memory_bandwidth"] = "device properties: 2 x memory clock x bus width (double data rate); the achievable share is calibrated";
    gpu["l2_bandwidth"] = std::to_string(3 * bw / 1e9) + " GB/s";
    src["gpu.l2_bandwidth"] = "guessed: 3 x the memory bandwidth; calibrated by the l2 family";
  }
  if (num("l2_bytes") > 0) {
    gpu["l2"] = std::to_string(static_cast<long long>(num("l2_bytes"))) + " B";
    src["gpu.l2"] = prop;
  }
  for (auto [key, field] : {std::pair{"registers_per_sm", "registers_per_sm"}, std::pair{"max_threads_per_sm", "max_threads_per_sm"},
                            std::pair{"max_blocks_per_sm", "max_blocks_per_sm"}})
    if (num(key) > 0) {
      gpu[field] = static_cast<int>(num(key));
      src[std::string("gpu.") + field] = prop;
    }
  for (auto [key, field] :
       {std::pair{"shared_memory_per_sm", "shared_memory_per_sm"}, std::pair{"shared_memory_per_block", "shared_memory_per_block"}})
    if (num(key) > 0) {
      gpu[field] = std::to_string(static_cast<long long>(num(key))) + " B";
      src[std::string("gpu.") + field] = prop;
    }
  gpu["peak"] = peak_json(a->r, per);
  char cc[32];
  std::snprintf(cc, sizeof cc, "%d.%d", a->major, a->minor);
  src["gpu.peak"] = std::string("guessed: ") + a->arch + " rates per SM and clock (cc " + cc +
                    " parts' datasheet peaks / SMs / boost clock) x this GPU's SMs and clock; GEMM rates are calibrated";
  const std::string lower = ascii_lower(name);
  return json{
      {"name", spec_slug(name)},
      {"match", json::array({lower})},
      {"extends", "h100-sxm"},
      {"description", name + " (compute capability " + d.value("cc", std::string("?")) + "): a base spec from its device properties and " +
                          a->arch + " rates; fields it does not set are the h100-sxm preset's until calibrated"},
      {"gpu", gpu},
      {"sources", src}};
}

namespace {

// AMD Instinct parts: dense FLOPs per CU per clock (datasheet peak / CUs / peak engine clock),
// the peak engine clock and the HBM bandwidth. CDNA3: MI300X 304 CUs at 2.1 GHz, FP64 81.7 /
// 163.4 (matrix), FP32 163.4, TF32 653.7, FP16/BF16 1307.4, FP8 and INT8 2614.9 TFLOP/s, 5.3 TB/s
// (MI325X 6 TB/s; MI300A 228 CUs). CDNA2: MI250X 220 CUs at 1.7 GHz, FP64 47.9 / 95.7, FP32 47.9 /
// 95.7 (matrix), FP16/BF16 383, INT8 383, 3.2 TB/s; MI210 104 CUs, 1.6 TB/s.
struct AmdPart {
  const char* match;  // in the device name, lower case
  const char* arch;
  double clock_ghz, bandwidth_tbs;
  Rates r;              // t_tf32: the FP32 matrix rate
  const char* extends;  // the preset whose other figures (efficiencies, links) stand in
};
constexpr AmdPart kAmd[] = {
    {"mi325", "CDNA3", 2.1, 6.0, {128, 256, 512, 256, 1024, 2048, 4096, 4096}, "h100-sxm"},
    {"mi300", "CDNA3", 2.1, 5.3, {128, 256, 512, 256, 1024, 2048, 4096, 4096}, "h100-sxm"},
    {"mi250", "CDNA2", 1.7, 3.2, {128, 128, 256, 256, 256, 1024, 0, 1024}, "a100-sxm-80gb"},
    {"mi210", "CDNA2", 1.7, 1.6, {128, 128, 256, 256, 256, 1024, 0, 1024}, "a100-sxm-80gb"},
};

}  // namespace

std::string amd_part_from_properties(unsigned sm_count, int cc_major, int cc_minor) {
  if (cc_major == 9 && cc_minor == 4) return sm_count == 304 ? "AMD Instinct MI300X" : sm_count == 228 ? "AMD Instinct MI300A" : "";
  if (cc_major == 9 && cc_minor == 0 && sm_count == 104) return "AMD Instinct MI210";
  return "";
}

nlohmann::json spec_from_trace_device(const std::string& name, unsigned sm_count, int cc_major, int cc_minor, double memory_bytes,
                                      double clock_hz, std::string& why) {
  using nlohmann::json;
  why.clear();
  if (name.empty() || sm_count == 0) return nullptr;
  const std::string lower = ascii_lower(name);
  char mem[64] = "";
  if (memory_bytes > 0) std::snprintf(mem, sizeof mem, ", %.0f GiB", memory_bytes / (1u << 30));
  if (lower.find("amd") != std::string::npos || lower.find("instinct") != std::string::npos || lower.find("radeon") != std::string::npos) {
    const AmdPart* p = nullptr;
    for (const AmdPart& a : kAmd)
      if (lower.find(a.match) != std::string::npos) {
        p = &a;
        break;
      }
    if (!p) return nullptr;
    const double clock = clock_hz > 0 ? clock_hz : p->clock_ghz * 1e9, per = sm_count * clock;
    json gpu = {{"name", name},
                {"sm_count", sm_count},
                {"clock", std::to_string(clock / 1e9) + " GHz"},
                {"memory_bandwidth", std::to_string(p->bandwidth_tbs * 1e3) + " GB/s"},
                {"peak", peak_json(p->r, per)}};
    if (memory_bytes > 0) gpu["memory"] = std::to_string(static_cast<long long>(memory_bytes)) + " B";
    char b[300];
    std::snprintf(b, sizeof b,
                  "%s has no preset: a spec from its device properties (%u CUs%s) and %s rates per CU at %.1f GHz (%s), "
                  "%.1f TB/s; the rest %s's",
                  name.c_str(), sm_count, mem, p->arch, clock / 1e9, clock_hz > 0 ? "its clock" : "guessed", p->bandwidth_tbs, p->extends);
    why = b;
    return json{{"name", spec_slug(name)}, {"extends", p->extends}, {"description", why}, {"gpu", gpu}};
  }
  if (cc_major <= 0) return nullptr;
  // NVIDIA: the validate path's rule on the properties a trace records; the clock (none recorded)
  // the architecture's typical boost.
  const double clock = clock_hz > 0 ? clock_hz : cc_major >= 9 ? 1.98e9 : cc_major == 8 ? 1.7e9 : 1.5e9;
  json d = {{"name", name},
            {"sm_count", sm_count},
            {"clock_khz", clock / 1e3},
            {"cc", std::to_string(cc_major) + "." + std::to_string(cc_minor)}};
  if (memory_bytes > 0) d["memory_bytes"] = memory_bytes;
  json spec = spec_from_device(d, name);
  char b[300];
  std::snprintf(b, sizeof b,
                "%s has no preset: a spec from its device properties (%u SMs%s, compute capability %d.%d) and its "
                "architecture's rates per SM at %.2f GHz (%s); the rest h100-sxm's",
                name.c_str(), sm_count, mem, cc_major, cc_minor, clock / 1e9, clock_hz > 0 ? "its clock" : "guessed");
  why = b;
  spec["description"] = why;
  return spec;
}

}  // namespace bneck
