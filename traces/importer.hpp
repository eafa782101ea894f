// One importer interface; a registry that sniffs the format from the file's first bytes.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "traces/ir.hpp"

namespace bneck {

struct ImportOptions {
  bool progress = true;  // phase lines on stderr when an import takes more than a second
};

class Importer {
 public:
  virtual ~Importer() = default;
  virtual const char* name() const = 0;
  virtual const char* description() const = 0;
  // Confidence 0..100 that the file is in this format, from its first bytes (of a gzip file, the
  // first decompressed bytes if they can be read) and its path.
  virtual int sniff(std::string_view head, const std::string& path) const = 0;
  virtual Trace import(const std::string& path, const ImportOptions& opt) const = 0;
};

const std::vector<std::unique_ptr<Importer>>& importers();
// Opens the file read-only, checks that it exists and is not empty, sniffs and imports.
// Throws InputError naming the file for a missing, empty, unrecognised or malformed input.
Trace load_trace(const std::string& path, const ImportOptions& opt = {});
// One trace per rank: files, or directories whose trace files (.json, .json.gz, .sqlite, sorted by
// name) are taken. One file loads as load_trace does; several are merged into one multi-rank trace
// (traces/collectives.hpp), their communication kernels matched into collectives.
Trace load_traces(const std::vector<std::string>& paths, const ImportOptions& opt = {});

}  // namespace bneck
