// Op selectors (docs/design.md): terms joined with '&', all of which must hold.
//   name~REGEX  kind=kernel|memcpy|memset|collective|api  stream=N  device=N  rank=N
//   range~REGEX (launched inside a matching NVTX range)  dur>T  dur<T (units: ns, us, ms, s)
//   id=N[,N...]
#pragma once
#include <memory>
#include "sim/base/regex.hpp"
#include <string>
#include <vector>

#include "traces/ir.hpp"

namespace bneck {

class Selector {
 public:
  // Throws InputError with the offending term on a malformed selector.
  static Selector parse(const std::string& text);
  // Binds to a trace (resolves range membership); call before matches().
  void bind(const Trace& t);
  bool matches(OpId id) const;
  const std::string& text() const { return text_; }

 private:
  struct Term {
    enum Kind { Name, KindIs, Stream, Device, Rank, Range, DurGt, DurLt, Ids } kind;
    Regex re;
    std::string value;
    std::vector<std::uint64_t> ids;
    TimeNs dur = 0;
  };
  std::string text_;
  std::vector<Term> terms_;
  const Trace* t_ = nullptr;
  std::vector<bool> in_range_;  // per op, when a range term is present
};

}  // namespace bneck
