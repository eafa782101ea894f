// Execution-trace importers: MLCommons Chakra (JSON `workload_graph` as chakra's converter writes
// it, and the protobuf `.et` form: length-delimited GlobalMetadata + Node messages of
// schema/protobuf/et_def.proto, read with a small wire-format reader since only a handful of
// fields matter) and PyTorch execution traces (`{"schema": ..., "nodes": [...]}`, the input of
// Chakra's converter).
//
// Both become hand-written-style workloads (measured = false) with explicit dependencies:
// Chakra nodes keep their runtime (us) and data/control dependencies; CPU nodes go to a host lane,
// GPU compute nodes to a compute stream, communication nodes to a communication stream (flagged as
// NCCL kernels so that overlap and the collective what-ifs see them); each lane runs one node at a
// time, in an order consistent with the dependencies. PyTorch ETs carry no durations: their
// operators (leaf nodes) import with zero duration and their tensor data dependencies (an input
// tensor depends on the last node that output it), with the op's input shapes in its name
// ("aten::mm, sizes = [[64, 128], [128, 64]]"), ready for the cost models once timed.
#pragma once
#include "traces/importer.hpp"

namespace bneck {

class ChakraImporter : public Importer {
 public:
  const char* name() const override { return "chakra"; }
  const char* description() const override {
    return "Chakra execution trace (JSON workload_graph or protobuf .et) or PyTorch execution trace JSON";
  }
  int sniff(const SniffInput& in) const override;
  Trace import(const std::string& path, const ImportOptions& opt) const override;
};

}  // namespace bneck
