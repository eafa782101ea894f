// Reading JSON inputs safely (every reader of a user's JSON goes through these):
// - parse_json_input: a malformed document, a number out of range (1e400) or nesting deeper than
//   kMaxJsonDepth (a 100,000-deep document would overflow the stack of any recursive walk) is an
//   InputError naming the file and the byte;
// - with_json_errors: runs a reader over a parsed document and turns a value of the wrong type or
//   out of range (an unchecked .get<>()) into an InputError naming the file, not an internal error.
#pragma once
#include <istream>
#include <nlohmann/json.hpp>
#include <string>

#include "sim/base/error.hpp"

namespace bneck {

inline constexpr int kMaxJsonDepth = 256;

nlohmann::json parse_json_input(std::istream& in, const std::string& path);
nlohmann::json parse_json_input(const std::string& text, const std::string& path);

template <typename F>
auto with_json_errors(const std::string& path, F&& read) -> decltype(read()) {
  try {
    return read();
  } catch (const nlohmann::json::exception& e) {
    std::string what = e.what();
    if (auto p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    throw InputError(path, "unexpected JSON value: " + what);
  }
}

}  // namespace bneck
