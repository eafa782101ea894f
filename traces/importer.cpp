#include "traces/importer.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>
#include <dirent.h>
#include <fstream>
#include <sys/stat.h>
#include <zlib.h>

#include "sim/base/error.hpp"
#include "traces/chakra/chakra_importer.hpp"
#include "traces/collectives.hpp"
#include "traces/gzbuf.hpp"
#include "traces/json_io.hpp"
#include "traces/kineto/kineto_importer.hpp"
#include "traces/nsys/nsys_importer.hpp"
#include "traces/nsys/nsys_report.hpp"

namespace bneck {

std::size_t json_content_start(std::string_view head) {
  const std::size_t bom = head.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;
  return head.find_first_not_of(" \t\r\n", bom);
}

bool json_object_start(std::string_view head) {
  const std::size_t p = json_content_start(head);
  return p != std::string_view::npos && head[p] == '{';
}

bool SniffInput::has_key(std::string_view k) const {
  if (keys)
    for (const auto& kv : *keys)
      if (kv.first == k) return true;
  return false;
}

std::string_view SniffInput::key_value(std::string_view k) const {
  if (keys)
    for (const auto& kv : *keys)
      if (kv.first == k) return kv.second;
  return {};
}

std::optional<std::vector<std::pair<std::string, std::string>>> json_top_level_keys(const std::string& path, std::string_view stop_key) {
  GzBuf buf(path);
  using Traits = std::streambuf::traits_type;
  auto next = [&]() -> int { return buf.sbumpc(); };
  int c = next();
  if (c == 0xEF && next() == 0xBB && next() == 0xBF) c = next();
  while (c == ' ' || c == '\t' || c == '\r' || c == '\n') c = next();
  if (c != '{') return std::nullopt;
  std::vector<std::pair<std::string, std::string>> keys;
  constexpr std::size_t kMaxKeys = 4096, kMaxText = 256;
  // Reads a string whose opening quote was consumed; keeps its first kMaxText bytes (escapes kept
  // as written: keys and format names have none). False at end of input.
  auto read_string = [&](std::string* out) {
    for (int ch; (ch = next()) != Traits::eof();) {
      if (ch == '"') return true;
      if (ch == '\\') {
        int esc = next();
        if (esc == Traits::eof()) return false;
        if (out && out->size() + 1 < kMaxText) {
          out->push_back('\\');
          out->push_back(static_cast<char>(esc));
        }
        continue;
      }
      if (out && out->size() < kMaxText) out->push_back(static_cast<char>(ch));
    }
    return false;
  };
  int depth = 1;
  bool want_key = true;  // at depth 1: the next string is a key
  // A corrupt, truncated or bomb gzip stream throws InputError naming the file (GzBuf).
  while ((c = next()) != Traits::eof()) {
    if (c == '"') {
      if (depth == 1 && want_key) {
        if (keys.size() >= kMaxKeys) break;
        keys.emplace_back();
        if (!read_string(&keys.back().first)) break;
        if (!stop_key.empty() && keys.back().first == stop_key) break;
        want_key = false;
        // The value: a string is kept, anything else skipped by the loop.
        while ((c = next()) == ' ' || c == '\t' || c == '\r' || c == '\n') {}
        if (c != ':') break;
        while ((c = next()) == ' ' || c == '\t' || c == '\r' || c == '\n') {}
        if (c == '"') {
          if (!read_string(&keys.back().second)) break;
        } else if (c == '{' || c == '[') {
          ++depth;
        } else if (c == Traits::eof()) {
          break;
        }
      } else if (!read_string(nullptr)) {
        break;
      }
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) break;
    } else if (c == ',' && depth == 1) {
      want_key = true;
    }
  }
  return keys;
}

const std::vector<std::unique_ptr<Importer>>& importers() {
  static const auto list = [] {
    std::vector<std::unique_ptr<Importer>> v;
    v.push_back(std::make_unique<NsysSqliteImporter>());
    v.push_back(std::make_unique<BneckJsonImporter>());
    v.push_back(std::make_unique<KinetoImporter>());
    v.push_back(std::make_unique<ChakraImporter>());
    return v;
  }();
  return list;
}

Trace load_trace(const std::string& path, const ImportOptions& opt) {
  struct stat sb {};
  if (::stat(path.c_str(), &sb) != 0) throw InputError(path, "no such file");
  if (S_ISDIR(sb.st_mode)) throw InputError(path, "is a directory, expected a trace file");
  if (sb.st_size == 0) throw InputError(path, "empty file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "cannot open for reading");
  std::string head(4096, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  in.close();  // not held open while an importer (or a program it runs) reads the file
  const auto via_export = [&](const std::string& exported) { return load_trace(exported, opt); };
  if (is_nsys_report(head)) return import_nsys_report(path, via_export);
  // Gzip: the sniffers see the first bytes inside (if they cannot be read, the compressed ones,
  // and the importer that claims the file says why).
  if (head.size() >= 2 && static_cast<unsigned char>(head[0]) == 0x1f && static_cast<unsigned char>(head[1]) == 0x8b) {
    if (gzFile f = gzopen(path.c_str(), "rb")) {
      std::string inner(4096, '\0');
      int n = gzread(f, inner.data(), static_cast<unsigned>(inner.size()));
      gzclose(f);
      if (n > 0) head = inner.substr(0, static_cast<std::size_t>(n));
    }
  }
  if (is_nsys_report(head)) throw InputError(path, "a gzip-compressed Nsight Systems report: decompress it first");
  // A tar archive (POSIX ustar: the magic at byte 257 of its first header), gzipped or not: the
  // traces inside are files of their own.
  if (head.size() >= 262 && head.compare(257, 5, "ustar") == 0)
    throw InputError(path, "a tar archive: unpack it and pass the trace files inside (or their folder)");
  auto pick = [&](const SniffInput& input, int& best_score) {
    const Importer* best = nullptr;
    for (const auto& imp : importers()) {
      int s = imp->sniff(input);
      if (s > best_score) {
        best_score = s;
        best = imp.get();
      }
    }
    return best;
  };
  int best_score = 0;
  const Importer* best = pick(SniffInput{head, path}, best_score);
  // A JSON object whose telling keys lie past the head: sniff again on its top-level keys, up to a
  // "traceEvents" (a Kineto trace whose metadata fills the head: its events are the rest of the
  // file, which the scan would otherwise read through, 40 % of the replay of a 55 MB trace).
  if (best_score < 50 && json_object_start(head)) {
    if (auto keys = json_top_level_keys(path, "traceEvents")) {
      int s = 0;
      if (const Importer* by_keys = pick(SniffInput{head, path, &*keys}, s)) {
        best = by_keys;
        best_score = s;
      }
    }
  }
  if (!best && named_nsys_report(path)) return import_nsys_report(path, via_export);
  if (!best) {
    std::string names;
    for (const auto& imp : importers()) names += std::string(names.empty() ? "" : ", ") + imp->name();
    throw InputError(path, "unrecognised trace format (supported: " + names + ")");
  }
  return best->import(path, opt);
}

Trace load_traces(const std::vector<std::string>& paths, const ImportOptions& opt) {
  std::vector<std::string> files;
  for (const auto& p : paths) {
    struct stat sb {};
    if (::stat(p.c_str(), &sb) == 0 && S_ISDIR(sb.st_mode)) {
      std::vector<std::string> in_dir;
      if (DIR* d = ::opendir(p.c_str())) {
        while (dirent* e = ::readdir(d)) {
          std::string n = e->d_name;
          auto ends = [&](const std::string& suf) {
            return n.size() > suf.size() && n.compare(n.size() - suf.size(), suf.size(), suf) == 0;
          };
          if (n[0] != '.' && (ends(".json") || ends(".json.gz") || ends(".sqlite") || named_nsys_report(n))) in_dir.push_back(p + "/" + n);
        }
        ::closedir(d);
      }
      std::sort(in_dir.begin(), in_dir.end());
      // A report beside its own export (nsys export's default name: REPORT.sqlite) is one rank: the export is read.
      const std::vector<std::string> listed = in_dir;
      in_dir.erase(std::remove_if(in_dir.begin(), in_dir.end(),
                                  [&](const std::string& f) {
                                    return named_nsys_report(f) &&
                                           std::binary_search(listed.begin(), listed.end(), f.substr(0, f.rfind('.')) + ".sqlite");
                                  }),
                   in_dir.end());
      if (in_dir.empty()) throw InputError(p, "directory holds no trace files (.json, .json.gz, .sqlite, .nsys-rep)");
      files.insert(files.end(), in_dir.begin(), in_dir.end());
    } else {
      files.push_back(p);
    }
  }
  if (files.empty()) throw InputError("no trace given");
  // One trace per rank: imported on as many threads as the machine has (results in file order, so
  // the merge is deterministic); the first error, in file order, is the one reported.
  std::vector<Trace> parts(files.size());
  std::vector<std::exception_ptr> errors(files.size());
  std::atomic<std::size_t> next{0};
  const std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
  // Where the ranks alone keep every core busy, a rank's events are read on one thread (a second
  // reading thread per rank would only take a core from another rank, at the cost of its records).
  ImportOptions each = opt;
  if (files.size() >= cores) each.json_round = 0;
  auto work = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < files.size();) {
      try {
        parts[i] = load_trace(files[i], each);
      } catch (...) { errors[i] = std::current_exception(); }
    }
  };
  std::size_t threads = std::min<std::size_t>(files.size(), cores);
  std::vector<std::thread> pool;
  for (std::size_t k = 1; k < threads; ++k) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return merge_traces(std::move(parts));
}

}  // namespace bneck
