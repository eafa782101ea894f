// Errors. Library code throws; only tools/main maps them to exit codes (2: bad input, 1: internal).
#pragma once
#include <algorithm>
#include <stdexcept>
#include <string>

namespace bneck {

// Bad input or usage: a file that is missing, truncated, malformed or of the wrong format, or a
// malformed option value. The message names the file and, where known, the record.
// The message is one line of at most 186 characters (the CLI prints it after "bneck: error: ", so
// the line stays within 200): runs of whitespace (newlines of a quoted SQLite schema, say) become one
// space, the paths of a longer message show their file names only (".../name"), and what still
// does not fit is cut with "...", so the file and record at its start stay.
class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& what) : std::runtime_error(one_line(what)), full_(what) {}
  InputError(const std::string& file, const std::string& what)
      : std::runtime_error(one_line(file + ": " + what)), full_(file + ": " + what) {}
  // The message before it was made one short line (its paths whole): for a caller that restates it.
  const std::string& full() const { return full_; }

  static constexpr std::size_t kMax = 183;  // and "..." after it: 186
  // A message longer than kMax shows its paths by their file names: ".../name" for a token with a
  // directory, longer than 24 characters; the file it names first stays whole unless it alone is
  // longer than 60.
  static std::string shorter_paths(const std::string& s) {
    if (s.size() <= kMax) return s;
    std::string out;
    for (std::size_t at = 0; at < s.size();) {
      const std::size_t end = std::min(s.find(' ', at), s.size());
      std::string tok = s.substr(at, end - at);
      const std::size_t slash = tok.rfind('/');
      if (tok.size() > (at == 0 ? 60u : 24u) && slash != std::string::npos && slash + 1 < tok.size() &&
          tok.find("://") == std::string::npos)
        tok = ".../" + tok.substr(slash + 1);
      out += tok;
      if (end < s.size()) out += ' ';
      at = end + 1;
    }
    return out;
  }

  static std::string one_line(const std::string& text) {
    const std::string s = shorter_paths(text);
    std::string out;
    out.reserve(std::min(s.size(), kMax + 3));
    bool space = false;
    for (char c : s) {
      if (c == '\n' || c == '\r' || c == '\t' || c == ' ') {
        space = !out.empty();
        continue;
      }
      // Something is still to come past kMax: cut there and say so ("..."); a message of exactly
      // kMax characters is whole and gets no "...".
      if (out.size() + (space ? 1 : 0) >= kMax) return out + "...";
      if (space) out.push_back(' ');
      space = false;
      out.push_back(c);
    }
    return out;
  }

 private:
  std::string full_;
};

}  // namespace bneck
