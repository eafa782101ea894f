// Nsight Systems SQLite export importer (nsys 2022.1 .. 2025.x; schema notes in
// $BNECK_EXTRA_TRACES/docs/nsys-sqlite-schema.md). Every table and every non-core column is optional.
#pragma once
#include "traces/importer.hpp"

namespace bneck {

// The note a trace carries when its capture traced OS runtime calls (nsys -t osrt: OSRT_API rows).
inline constexpr const char* kNsysOsrtNote = "nsys: OS runtime calls traced (-t osrt)";

class NsysSqliteImporter : public Importer {
 public:
  const char* name() const override { return "nsys-sqlite"; }
  const char* description() const override { return "Nsight Systems SQLite export (nsys export --type sqlite)"; }
  int sniff(const SniffInput& in) const override;
  Trace import(const std::string& path, const ImportOptions& opt) const override;
};

}  // namespace bneck
