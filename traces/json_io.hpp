// Canonical JSON form of the IR ("format": "bneck-trace"), written and read back losslessly, and
// the hand-written workload form: ops with durations ("8 ms") and explicit dependencies, no
// measured times. See tests/data/overlap_workload.json for an example.
#pragma once
#include <iosfwd>
#include <string>

#include "traces/importer.hpp"

namespace bneck {

void write_trace_json(const Trace& t, std::ostream& out);
Trace read_trace_json(std::istream& in, const std::string& source);

class BneckJsonImporter : public Importer {
 public:
  const char* name() const override { return "bneck-json"; }
  const char* description() const override { return "bneck canonical trace / hand-written workload (JSON)"; }
  int sniff(const SniffInput& in) const override;
  Trace import(const std::string& path, const ImportOptions& opt) const override;
};

}  // namespace bneck
