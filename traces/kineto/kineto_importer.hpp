// PyTorch profiler (Kineto) Chrome-trace JSON importer, plain or gzip, streamed through
// nlohmann::json's SAX parser so that the document is never held in memory: each event becomes
// IR ops, ranges and side-table entries as it is read.
//
// Mapping: `cuda_runtime` / `cuda_driver` events (and ROCm's `hip*` calls under the same
// categories) are host API calls on their (pid, tid) thread; `kernel`, `gpu_memcpy`, `gpu_memset`
// are device ops on their (device, stream) lane, joined to their launch through
// `args.correlation`; `cuda_sync` events give the stream, event and device of the API call with the
// same correlation (`wait_on_cuda_event_record_corr_id` names the cudaEventRecord a wait or event
// sync waits for); `user_annotation` (incl. `ProfilerStep#N`) are ranges on their thread, as NVTX
// ranges are; `cpu_op`s with `Input Dims` become ranges named like PyTorch's emit_nvtx ranges
// ("aten::addmm, sizes = [[8, 2048], ...]") so that the cost models read their shapes, and
// convolution ops their `Concrete Inputs` too (", args = |||[1, 1]|[2, 2]|...", one field an
// argument, 256 bytes at most: the stride, padding and dilation that size the output);
// `record_param_comms` and `nccl:*` annotations carry the collective, message size, dtype and
// process group into their range names for collective matching. Timestamps: integer or float
// microseconds, converted to integer nanoseconds from the number's text (no double rounding of
// 16-digit timestamps). `deviceProperties` -> devices, `distributedInfo.rank` -> the process's rank.
#pragma once
#include "traces/importer.hpp"

namespace bneck {

// The note a trace carries when its profile recorded Python stacks (`python_function` events:
// with_stack=True), the count the events.
inline constexpr const char* kKinetoStackNote = "kineto: python_function events (with_stack)";
// ... and when it recorded the allocator's events (`[memory]` instant events: profile_memory=True).
inline constexpr const char* kKinetoMemoryNote = "kineto: [memory] events (profile_memory)";

class KinetoImporter : public Importer {
 public:
  const char* name() const override { return "kineto-json"; }
  const char* description() const override { return "PyTorch profiler (Kineto) Chrome-trace JSON, plain or .gz"; }
  int sniff(const SniffInput& in) const override;
  Trace import(const std::string& path, const ImportOptions& opt) const override;
};

// "1694128201427784" -> 1694128201427784000; "5080223672997.205" -> 5080223672997205 (ns).
// Throws InputError for text that is not a decimal number.
TimeNs kineto_us_to_ns(std::string_view text);

}  // namespace bneck
