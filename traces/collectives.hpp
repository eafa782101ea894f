// Multi-rank traces: merging one trace per rank into one Trace, and matching the ranks'
// communication kernels into collectives.
//
// Matching: per rank, the communication kernels in launch order; each is keyed by its process
// group (from the enclosing `record_param_comms` range: "Process Group Name"/"Ranks"; else
// "world") and its kind (from the annotation, e.g. `nccl:all_to_all`, or the kernel name,
// `ncclKernel_AllReduce_RING_LL_Sum_float`). The i-th kernel of a group on each rank that has the
// group forms the group's i-th collective (NCCL requires every member to issue a group's
// collectives in the same order). A kind mismatch at position i stops that group's matching and is
// reported. Message size: the annotation's input sizes x element size, or record_param_comms'
// `In msg nelems` x dtype size.
#pragma once
#include <string>
#include <vector>

#include "traces/ir.hpp"

namespace bneck {

// Appends traces (one per rank) into one; ranks come from each trace's processes (Kineto's
// distributedInfo.rank), else the file's position. The result is finalized and matched.
Trace merge_traces(std::vector<Trace> parts);

// Fills t.collectives (t must be finalized). Single-rank traces get one-member collectives.
void match_collectives(Trace& t);

// Ranks traced on different hosts have different clocks: where a rank's collectives (not
// point-to-point) consistently end more than 50 us before or after the first rank's, the whole
// rank is shifted by the median offset (counted as an anomaly), then re-sorted and re-matched.
void align_ranks(Trace& t);

CollKind collective_kind_from_name(std::string_view name);

}  // namespace bneck
