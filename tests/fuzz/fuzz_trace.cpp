// libFuzzer harness: one importer (chosen by FUZZ_SUFFIX: .sqlite nsys, .json Kineto/bneck/Chakra/
// PyTorch ET, .et Chakra protobuf, .json.gz gzip) on arbitrary bytes, then the replay pipeline and
// the kernels' work estimate and the structure search (its levels replayed as ranges) on whatever imports. Bad input must end in
// InputError; anything else (a crash, a sanitizer report, another exception) is a finding.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "hw/spec.hpp"
#include "models/kernel_work.hpp"
#include "models/replay.hpp"
#include "sim/analysis/structure.hpp"
#include "sim/base/error.hpp"
#include "traces/importer.hpp"

#ifndef FUZZ_SUFFIX
#define FUZZ_SUFFIX ".json"
#endif

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // An input that looks like an Nsight Systems report is never exported by an nsys of the machine
  // (traces/nsys/nsys_report.hpp): the run stays within this process.
  static const bool hermetic = ::setenv("BNECK_NSYS", "/nonexistent/nsys", 1) == 0;
  (void)hermetic;
  // A private file per process (the importers take paths; /dev/shm keeps it in memory).
  static const std::string path = "/dev/shm/bneck_fuzz_" + std::to_string(::getpid()) + FUZZ_SUFFIX;
  if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
    if (size) std::fwrite(data, 1, size, f);
    std::fclose(f);
  } else {
    return 0;
  }
  try {
    bneck::Trace t = bneck::load_trace(path);
    if (t.ops.size() <= 20000) {
      bneck::ReplayOptions o;
      (void)bneck::run_replay(t, o);
      // The kernels' work from their names, shapes and recorded arguments (the what-ifs' input).
      static const bneck::HwSpec hw = bneck::load_hw("h100-sxm");
      (void)bneck::estimate_work(t, hw);
      // Structure recognition on whatever imports, its levels replayed as ranges.
      bneck::add_structure_ranges(t, bneck::find_structure(t));
      o.range_regex = "@.*";
      (void)bneck::run_replay(t, o);
    }
  } catch (const bneck::InputError&) {}
  return 0;
}
