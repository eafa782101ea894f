// Writing reports: "-" is stdout; a file is written to a temporary beside it and renamed into
// place, so a failure never leaves a half-written report (or harms an existing one).
#pragma once
#include <functional>
#include <iosfwd>
#include <string>

namespace bneck {

void write_output(const std::string& path, const std::function<void(std::ostream&)>& fill);

}  // namespace bneck
