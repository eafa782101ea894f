// One importer interface; a registry that sniffs the format from the file's content: its first
// bytes and, for a JSON object, its top-level keys wherever they lie in the file.
#pragma once
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "traces/ir.hpp"

namespace bneck {

struct ImportOptions {
  bool progress = true;     // phase lines on stderr when an import takes more than a second
  bool json_pieces = true;  // a large Kineto document's events read in pieces (false: walked whole; same result)
  // Read in pieces from a file read whole already (not a gzip stream still inflating): about the
  // text of a round, which two threads read (0: one thread; the same result either way).
  std::size_t json_round = std::size_t{2} << 20;
  bool sqlite_scan = true;  // an nsys export's API and kernel tables read from the file format (false: through SQLite; same result)
};

// What a sniffer sees of a file.
struct SniffInput {
  std::string_view head;  // the first bytes (of a gzip file, the first decompressed bytes if readable)
  const std::string& path;
  // A JSON object's top-level keys in file order, each with its value's text when that value is a
  // string (else empty); null when the content is not a JSON object or the keys were not scanned.
  // The registry scans them (the whole file, skipping values) only when no sniffer claims the
  // file from its head, so a key order the head cannot show (a large "metadata" object first)
  // still finds its importer.
  const std::vector<std::pair<std::string, std::string>>* keys = nullptr;
  bool has_key(std::string_view k) const;
  // The string value of top-level key `k` ("" if absent or not a string).
  std::string_view key_value(std::string_view k) const;
};

// A JSON object's top-level keys (see SniffInput::keys), read from `path` (gzip or plain) by a
// scanner that skips values without building them; nullopt when the content is not a JSON object.
// Stops at the object's end, at malformed JSON (the keys read so far are returned) or, when
// `stop_key` is given, right after that key (its value not read); a corrupt or over-inflating gzip
// stream throws InputError naming the file.
std::optional<std::vector<std::pair<std::string, std::string>>> json_top_level_keys(const std::string& path,
                                                                                    std::string_view stop_key = {});

// True if `head`, after an optional UTF-8 byte-order mark and whitespace, opens a JSON object.
bool json_object_start(std::string_view head);
// Where the JSON content of `head` begins (a UTF-8 byte-order mark and whitespace skipped): its
// offset, or npos when there is none.
std::size_t json_content_start(std::string_view head);

class Importer {
 public:
  virtual ~Importer() = default;
  virtual const char* name() const = 0;
  virtual const char* description() const = 0;
  // Confidence 0..100 that the file is in this format, from its content and path.
  virtual int sniff(const SniffInput& in) const = 0;
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
