#include "sim/base/regex.hpp"

#include <re2/re2.h>

#include "sim/base/error.hpp"

namespace bneck {

Regex::Regex(const std::string& pattern) : pattern_(pattern) {
  RE2::Options opt;
  opt.set_log_errors(false);
  auto re = std::make_shared<const RE2>(pattern, opt);
  if (!re->ok()) throw InputError("bad regular expression '" + pattern + "' (" + re->error() + ")");
  re_ = std::move(re);
}

bool Regex::full(std::string_view text) const { return re_ && RE2::FullMatch(re2::StringPiece(text.data(), text.size()), *re_); }

bool Regex::search(std::string_view text) const { return re_ && RE2::PartialMatch(re2::StringPiece(text.data(), text.size()), *re_); }

}  // namespace bneck
