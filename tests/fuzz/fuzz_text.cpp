// libFuzzer harness for the small text inputs (chosen by FUZZ_KIND): 1 hw spec JSON, 2 scenario
// JSON, 3 measurements JSON, 4 selector, 5 range regex. Bad input must end in InputError.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "hw/spec.hpp"
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
