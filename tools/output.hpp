// Writing reports: "-" is stdout; a file is written to a temporary beside it and renamed into
// place, so a failure never leaves a half-written report (or harms an existing one).
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <iosfwd>
#include <string>

namespace bneck {

// JSON text for output: invalid UTF-8 in names (a trace's raw bytes) becomes U+FFFD, never an error.
std::string json_text(const nlohmann::json& j, int indent);

void write_output(const std::string& path, const std::function<void(std::ostream&)>& fill);

}  // namespace bneck
