// Errors. Library code throws; only tools/main maps them to exit codes (2: bad input, 1: internal).
#pragma once
#include <stdexcept>
#include <string>

namespace bneck {

// Bad input or usage: a file that is missing, truncated, malformed or of the wrong format, or a
// malformed option value. The message names the file and, where known, the record.
class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& what) : std::runtime_error(what) {}
  InputError(const std::string& file, const std::string& what) : std::runtime_error(file + ": " + what) {}
};

}  // namespace bneck
