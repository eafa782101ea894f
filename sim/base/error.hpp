// Errors. Library code throws; only tools/main maps them to exit codes (2: bad input, 1: internal).
#pragma once
#include <algorithm>
#include <stdexcept>
#include <string>

namespace bneck {

// Bad input or usage: a file that is missing, truncated, malformed or of the wrong format, or a
// malformed option value. The message names the file and, where known, the record.
// The message is one line: runs of whitespace (newlines of a quoted SQLite schema, say) become one
// space, and past 480 characters it is cut with "...", so the file and record at its start stay.
class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& what) : std::runtime_error(one_line(what)) {}
  InputError(const std::string& file, const std::string& what) : std::runtime_error(one_line(file + ": " + what)) {}

  static std::string one_line(const std::string& s) {
    constexpr std::size_t kMax = 480;
    std::string out;
    out.reserve(std::min(s.size(), kMax + 3));
    bool space = false;
    for (char c : s) {
      if (c == '\n' || c == '\r' || c == '\t' || c == ' ') {
        space = !out.empty();
        continue;
      }
      if (space) out.push_back(' ');
      space = false;
      out.push_back(c);
      if (out.size() >= kMax) return out + "...";
    }
    return out;
  }
};

}  // namespace bneck
