// Writing reports: "-" is stdout; a file is written to a temporary beside it and renamed into
// place, so a failure never leaves a half-written report (or harms an existing one).
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <iosfwd>
#include <cstddef>
#include <string>

namespace bneck {

// JSON text for output: invalid UTF-8 in names (a trace's raw bytes) becomes U+FFFD, never an error.
std::string json_text(const nlohmann::json& j, int indent);

// Text reports on standard output keep every line within this many characters: limit_stdout_lines()
// (main) wraps a longer one at a space, its continuation indented; write_output("-") bypasses it.
constexpr std::size_t kMaxLineChars = 200;
void limit_stdout_lines();
// printf to std::cout (so the line limit applies).
void print_text(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

void write_output(const std::string& path, const std::function<void(std::ostream&)>& fill);

}  // namespace bneck
