// --keep-memory: a caching allocator keeps device memory from one iteration to the next (PyTorch's,
// on, and not emptied in the loop; buffers allocated once): the allocation calls (kAllocationPattern:
// cudaMalloc, cudaFree, cuMemCreate, hipFree, ...) a process makes after its first iteration has
// launched its work take no time, each a zero-time pass-through node as --remove makes it: a cache
// serves the later requests and takes the frees back. Those before (the program's setup, the
// context a first cudaFree creates, the first iteration's own allocations) keep theirs. The
// iterations are structure recognition's @iteration (docs/traces.md); a process that repeats none
// keeps every call, and the log says so.
#include <algorithm>
#include <map>

#include "models/whatif/host_path.hpp"
#include "models/whatif/transform.hpp"
#include "sim/analysis/structure.hpp"
#include "sim/base/error.hpp"

namespace bneck {
namespace {

class KeepMemory : public TransformStep {
 public:
  bool needs_gpu_rates() const override { return false; }
  void apply(const WhatIfContext& ctx, WhatIfCase& c) const override {
    const Trace& t = ctx.trace;
    const HostTermOf term(t);
    std::vector<bool> alloc(t.ops.size(), false);
    for (OpId i = 0; i < t.ops.size(); ++i) alloc[i] = term.allocation(t.ops[i]);
    const std::size_t calls = count_selected(alloc);
    if (calls == 0) {
      c.log.push_back(text + ": no allocation call in the trace: nothing changes");
      return;
    }
    // Each rank's first iteration (by start), where it repeats one: the calls after its last launch
    // are a cache's.
    std::map<std::uint32_t, std::vector<std::pair<TimeNs, TimeNs>>> its;
    const Structure st = find_structure(t);
    if (const StructureLevel* it = st.level("iteration"))
      for (const StructureInstance& in : it->instances) its[in.rank].emplace_back(in.host_start_ns, in.host_end_ns);
    std::map<std::uint32_t, TimeNs> cut;
    for (auto& [rank, v] : its)
      if (v.size() >= 2) cut[rank] = std::min_element(v.begin(), v.end())->second;
    for (OpId i = 0; i < alloc.size(); ++i)  // kept: before the cut, or in a process without one
      if (alloc[i]) {
        const auto k = cut.find(t.rank_of(t.ops[i]));
        alloc[i] = k != cut.end() && t.ops[i].start > k->second;
      }
    const std::size_t removed = count_selected(alloc);
    const TimeNs before = remove_ops(c, alloc, text);
    c.log.push_back(text + ": " + std::to_string(removed) + " of " + std::to_string(calls) + " allocation calls take no time (" +
                    format_duration(before) + ")" +
                    (cut.empty()
                         ? std::string("; no process repeats an iteration (@iteration): the calls cannot be told from setup, all kept")
                         : "; those until each process's first iteration launched its work kept (setup, that iteration's own)"));
  }
};

std::unique_ptr<TransformStep> parse(const std::string&) { return std::make_unique<KeepMemory>(); }

}  // namespace

extern const TransformDef kKeepMemoryTransform{
    "keep-memory", "", TransformDef::Arg::None,
    "a caching allocator keeps memory between iterations: allocation calls after each process's first iteration take no time", parse};

}  // namespace bneck
