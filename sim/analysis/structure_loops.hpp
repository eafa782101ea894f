// Structure recognition's loop search (structure.cpp builds the levels from it): each process's
// device ops in launch order as a sequence of symbols, and the loops found in it, exact (tandem
// repeats of equal windows) or approximate (segments alike, not equal, between the strongest gaps).
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "traces/ir.hpp"

namespace bneck::structure_loops {

// One process's device ops in launch order, with what the search needs of each.
struct Seq {
  std::uint32_t process = 0;
  std::vector<OpId> dev;
  std::vector<std::uint32_t> sym;
  std::vector<LaneId> thread;        // launching thread (kNone: no launch recorded)
  std::vector<TimeNs> score;         // boundary evidence before the op: host time since the previous launch + GPU idle
  std::vector<char> optimizer;       // an optimizer's kernel by its name (multi_tensor_apply, adam, sgd, ...)
  std::vector<std::uint64_t> h, pw;  // prefix hashes, powers of kBase
  std::uint64_t window(std::size_t i, std::size_t len) const { return h[i + len] - h[i] * pw[len]; }
  // The launching thread of the first op in [b, e) whose launch is recorded (kNone: none is). A
  // trace may lose launches (a profiler's buffer, a window that starts mid-step): the op at b need
  // not have one.
  LaneId first_thread(std::size_t b, std::size_t e) const {
    for (std::size_t i = b; i < e; ++i)
      if (thread[i] != kNone) return thread[i];
    return kNone;
  }
};

struct Loop {
  std::size_t len = 0;
  std::uint32_t anchor = 0;         // symbol
  std::vector<std::size_t> starts;  // positions in the sequence, increasing, >= len apart
  std::vector<std::size_t> lens;    // a loop of similar, not equal, instances: each one's length
  std::size_t coverage() const {
    if (lens.empty()) return len * starts.size();
    std::size_t c = 0;
    for (std::size_t l : lens) c += l;
    return c;
  }
};

constexpr std::uint32_t kBoundaryAnchor = 0xFFFFFFFFu;  // anchored on boundary evidence, not a symbol
constexpr std::uint32_t kPeriodAnchor = 0xFFFFFFFEu;    // anchored on a recurrence distance

// One sequence a process (of the processes that launch device ops).
std::vector<Seq> launch_sequences(const Trace& t);

// Loops found greedily in [lo, hi): each takes its windows, the next searches the rest.
std::vector<Loop> find_loops(const Seq& s, std::size_t lo, std::size_t hi, std::size_t min_len, bool boundary_rotation);

// A loop whose window is a cycle of alike-but-unequal units (an inference loop cycling through
// sequence lengths 64, 128, 256: the exact repeat is the cycle): its windows cut where the
// boundary evidence (median over the instances) is 16x the median offset's and an eighth of that
// at the window's start (which holds the host's wait for the longest unit: 3.6 ms against 0.7 and
// 1.1 ms between the units of a 3.3 ms median step), at the offsets a training step's anatomy
// allows, into segments of 4+ ops within 2x of each other in length, at most half the neighbours
// equal (mostly equal ones are a finer exact loop: decode tokens after a prefill; sequence lengths
// 64 and 128 may run the same kernels). Nothing otherwise.
std::optional<Loop> split_alike(const Seq& s, const Loop& l);

// A loop whose windows come in runs of back-to-back instances, runs of different lengths, with
// alike glue between them (2x of its median, never empty): an outer loop whose units hold a
// varying number of the inner loop's (generate() calls of 8, 16, 24, 32 new tokens: each its
// prefill and setup, then the tokens). Its units: each starts at the strongest boundary evidence
// in the glue before its run; the last ends as far after its run as the others' cuts lie after
// theirs. At least 3 runs; nothing otherwise. [lo, hi) bounds the units.
std::optional<Loop> outer_of_runs(const Seq& s, const Loop& l, std::size_t lo, std::size_t hi);

// Instances that are alike but not equal (an inference engine's steps: the batch changes the
// kernels cuBLAS picks and the attention's): the segments between the strongest boundaries (the
// top k of the host-plus-GPU gaps, k = 4, 6, 8, 12, ... up to 30 % of the ops) when at least 60 %
// of them are within 25 % of the median length; the k whose segments of 0.5-2x the median cover
// most. Nothing unless they cover 60 % of the sequence, 4 of them or more.
std::optional<Loop> approximate_loop(const Seq& s);

}  // namespace bneck::structure_loops
