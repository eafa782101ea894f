// libFuzzer harness for the small text inputs (chosen by FUZZ_KIND): 1 hw spec JSON, 2 scenario
// JSON, 3 measurements JSON, 4 selector, 5 range regex, 6 serve request log (simulated when small),
// 7 model config (simulated on a few requests). Bad input must end in InputError.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "hw/spec.hpp"
#include "models/serving/serve.hpp"
#include "models/whatif/transform.hpp"
#include "sim/analysis/analysis.hpp"
#include "sim/base/error.hpp"
#include "sim/base/json_input.hpp"
#include "sim/whatif/selector.hpp"
#include "traces/importer.hpp"
#include "validate/calibrate.hpp"

#ifndef FUZZ_KIND
#define FUZZ_KIND 1
#endif

namespace {
std::string to_file(const std::uint8_t* data, std::size_t size) {
  static const std::string path = "/dev/shm/bneck_fuzz_" + std::to_string(::getpid()) + ".json";
  if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
    if (size) std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  return path;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    switch (FUZZ_KIND) {
      case 1: (void)bneck::load_hw(to_file(data, size)); break;
      case 2: (void)bneck::load_scenario(to_file(data, size)); break;
      case 3: {
        bneck::Measurements m = bneck::load_measurements(to_file(data, size));
        if (m.items.size() <= 64) (void)bneck::accuracy(m, bneck::load_hw("h200-sxm"));
        break;
      }
      case 4: {
        static const bneck::Trace demo = bneck::load_trace(BNECK_SOURCE_DIR "/traces/data/demo_pipeline.sqlite");
        bneck::Selector s = bneck::Selector::parse(text);
        s.bind(demo);
        for (bneck::OpId i = 0; i < demo.ops.size(); ++i) (void)s.matches(i);
        break;
      }
      case 6: {
        auto reqs = bneck::serve::load_request_log(to_file(data, size));
        double tokens = 0;
        for (const auto& r : reqs) tokens += static_cast<double>(r.prompt + r.output);
        if (tokens <= 2e5) {
          static const bneck::HwSpec hw = bneck::load_hw("h200-sxm");
          static const bneck::serve::LlmConfig llm =
              bneck::serve::load_llm_config(BNECK_SOURCE_DIR "/validate/reference/h200/serving/config.json");
          static const bneck::serve::StepCostModel m = bneck::serve::hardware_step_model(llm, hw);
          bneck::serve::EngineConfig e;
          e.num_blocks = 4096;
          for (auto pol : {bneck::serve::Policy::Continuous, bneck::serve::Policy::Static}) {
            e.policy = pol;
            auto r = bneck::serve::simulate(reqs, e, m, false);
            (void)bneck::serve::summarize(reqs, r.requests, {});
          }
          (void)bneck::serve::summarize_measured(reqs, {});
        }
        break;
      }
      case 7: {
        static const bneck::HwSpec hw = bneck::load_hw("h200-sxm");
        auto llm = bneck::serve::load_llm_config(to_file(data, size));
        auto m = bneck::serve::hardware_step_model(llm, hw);
        bneck::serve::EngineConfig e;
        e.block_size = 16;
        e.num_blocks =
            std::max<std::int64_t>(64, bneck::serve::blocks_for_memory(bneck::serve::default_kv_memory(hw, llm, e), llm, 16) % 100000);
        std::vector<bneck::serve::Request> reqs(3);
        for (int i = 0; i < 3; ++i) reqs[i] = {std::to_string(i), i * 1000000, 100, 20, {}, -1, 0};
        auto r = bneck::serve::simulate(reqs, e, m, false);
        (void)bneck::serve::summarize(reqs, r.requests, {});
        break;
      }
      default: {
        bneck::Regex re = bneck::range_regex(text);
        (void)re.full(text);
        (void)re.search(std::string(1000, 'a') + text);
        break;
      }
    }
  } catch (const bneck::InputError&) {}
  return 0;
}
