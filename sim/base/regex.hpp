// Regular expressions for names and selectors (--range, name~REGEX, range~REGEX): RE2, which
// matches in time linear in the text and never recurses, so a 100,000-character kernel name or a
// pattern like (a*)*b cannot crash or hang bneck (std::regex did both). RE2 syntax: no
// backreferences or lookaround; everything else a range or name pattern needs.
#pragma once
#include <memory>
#include <string>
#include <string_view>

namespace re2 {
class RE2;
}

namespace bneck {

class Regex {
 public:
  Regex() = default;
  // Throws InputError("bad regular expression ...") naming the pattern.
  explicit Regex(const std::string& pattern);
  bool full(std::string_view text) const;    // the whole text matches
  bool search(std::string_view text) const;  // some part of the text matches
  const std::string& pattern() const { return pattern_; }
  bool empty() const { return !re_; }

 private:
  std::string pattern_;
  std::shared_ptr<const re2::RE2> re_;
};

}  // namespace bneck
