// Structure recognition: the repeating units of a run found from the trace alone (iterations and,
// inside them, layers; the backward pass where another thread launches it), named `@level` and
// usable wherever a range is. Annotations are never needed.
//
// Algorithm (per process; O(n log n) in the device ops):
// 1. The launch sequence: the process's device ops in launch order (their launching calls' start,
//    any thread; a graph's nodes share their launch), each a symbol: a kernel by name, a copy by
//    direction, a memset. Shapes and grids are left out, so a decode step whose attention grid grows
//    with the KV length still repeats.
// 2. Loops: for every symbol (an anchor), the windows of length L (its most frequent distance to its
//    next occurrence) that start at its occurrences (also: the strongest boundaries, the distances
//    at which symbols recur most, the runs of a finer loop's instances); the windows equal to the most frequent one
//    (polynomial hashes of the symbol runs) are a loop's candidate instances, covering
//    count x L ops. The candidate that covers most wins (a larger L within 5 % of that coverage:
//    an iteration, not its layers); its ops are taken and the search repeats on the rest (a run of
//    several phases, each a loop), while a loop covers at least 5 % of the sequence.
// 3. Boundaries: the windows are rotated to where the run shows a boundary: the offset whose
//    median over the instances of (host time since the previous launch + GPU idle before the op)
//    is largest (a synchronization, the loop's own host work, data loading).
// 4. Inside one instance of each loop (all are equal), the same search finds the layers (L >= 2,
//    the leftmost rotation), copied into every instance. Backward passes: the runs of a loop
//    instance's ops launched by a thread other than the one launching its first op; the forward
//    before each; microbatches (forward + backward) where an iteration holds two or more.
// 4b. Units of a varying number of a loop's instances (generate() calls of different lengths): a
//    loop whose windows run back to back in runs of different lengths, with alike glue between
//    the runs (each call's setup and prefill), gives iterations that start at the strongest gap in
//    the glue before each run; the loop's windows are their layers (outer_of_runs).
// 5. Alike-but-unequal iterations (an engine's steps: the batch changes the kernels): where the
//    exact loops cover less than 90 %, the segments between the strongest gaps, re-anchored on the
//    kernel that occurs once a segment (approximate_loop), when they cover 1.5x as much.
// An instance's span is the GPU span of its device ops (first start to last end). A trace with no
// launch calls (a GPU-only profile) gets its instances as ranges on the first op's stream, over
// device time (RangeIndex: the device's ops that start inside).
#pragma once
#include <string>
#include <vector>

#include "traces/ir.hpp"

namespace bneck {

struct StructureInstance {
  std::uint32_t rank = 0;
  std::uint32_t loop = 0;                     // which loop of its level (a run with several phases has several)
  TimeNs start_ns = 0, end_ns = 0;            // GPU span of its device ops, on the trace's clock
  TimeNs host_start_ns = 0, host_end_ns = 0;  // its launching calls: first start, last end
  LaneId lane = kNone;                        // thread that launched its first op
  std::vector<OpId> ops;                      // device ops, in launch order
};

struct StructureLevel {
  std::string name;  // "run" (each process's whole launch sequence), "iteration", "layer", "microbatch", "forward", "backward"
  std::string how;   // what found it ("a loop of 412 ops, anchored on <kernel>")
  std::vector<StructureInstance> instances;  // in time order
  TimeNs period_ns = 0;                      // median start-to-start distance of consecutive instances
  TimeNs median_ns = 0;                      // median span
  double spread = 0;                         // (max - min) / median of the spans
  std::string rejected;                      // non-empty: why it is not offered (Structure::rejected)
};

struct Structure {
  std::vector<StructureLevel> levels;
  std::vector<std::string> conventions;  // what the trace follows (annotations, autograd thread, graphs)
  std::vector<std::string> notes;        // what the levels leave out (a warm-up before the first iteration)
  std::vector<StructureLevel> rejected;  // loops found whose instances are not one unit (their spans spread too far)
  const StructureLevel* level(const std::string& name) const;
};

Structure find_structure(const Trace& t);

// Appends each level's instances to t.ranges as ranges named "@" + level (Range::structure) on
// the thread that launched their first op, once (a second call does nothing).
void add_structure_ranges(Trace& t, const Structure& s);
// The loop a per-step what-if (diffusion steps, a pipeline budget) takes by default, from the
// structure ranges a trace holds: {outer, inner} = {"@run", "@iteration"} when there are at least
// 4 iterations (one generation of K steps), else {"@iteration", "@layer"} when layers exist, else
// {"", ""}.
std::pair<std::string, std::string> default_loop_ranges(const Trace& t);
// find_structure + add_structure_ranges when `text` (a --range regex, a selector) names a level
// ('@'); true if it did.
bool add_structure_ranges_if_named(Trace& t, const std::string& text);

}  // namespace bneck
