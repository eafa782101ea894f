// --repeat K:REGEX: every instance of the NVTX ranges matching REGEX (in full) runs K times in
// all, one copy after the other (K = 1 changes nothing; K = 0 removes the range's work). A range's
// work is the host calls on its thread inside it and the device ops they launched; the copies are
// synthetic nodes cloned with their internal edges (launches, stream order, events, syncs), so
// launch gaps and host time come along (GraphEditor::repeat). Spans of enclosing ranges include
// the copies; each copy is named "<op> (repeat N)".
#include <algorithm>

#include "models/whatif/transform.hpp"
#include "sim/analysis/analysis.hpp"
#include "sim/base/error.hpp"

namespace bneck {
namespace {

class Repeat : public TransformStep {
 public:
  Repeat(std::uint32_t times, std::string regex) : times_(times), regex_(std::move(regex)) {}
  bool needs_gpu_rates() const override { return false; }
  void apply(const WhatIfContext& ctx, WhatIfCase& c) const override {
    const Trace& t = ctx.trace;
    RangeIndex idx(t);
    std::vector<std::size_t> ranges = idx.match(range_regex(regex_));
    GraphEditor ed(c.edit_graph(), text);
    std::size_t nodes = 0;
    std::vector<OpId> set;
    for (std::size_t r : ranges) {
      idx.work(r, set);
      if (times_ == 0) {
        for (OpId n : set) ed.remove(n);
      } else {
        ed.repeat(set, times_ - 1);
      }
      nodes += set.size();
    }
    ed.commit();
    c.log.push_back(text + ": " + std::to_string(ranges.size()) + " range instances of " + std::to_string(nodes) + " ops " +
                    (times_ == 0
                         ? std::string("removed")
                         : "run " + std::to_string(times_) + " times (" + std::to_string(nodes * (times_ - 1)) + " synthetic nodes)"));
  }

 private:
  std::uint32_t times_;
  std::string regex_;
};

std::unique_ptr<TransformStep> parse(const std::string& arg) {
  auto c = arg.find(':');
  long k = -1;
  try {
    std::size_t pos = 0;
    k = c == std::string::npos ? -1 : std::stol(arg.substr(0, c), &pos);
    if (pos != c) k = -1;
  } catch (const std::exception&) { k = -1; }
  if (k < 0 || k > 10000 || c + 1 >= arg.size())
    throw InputError("--repeat " + arg + ": expected K:REGEX (K = 0 .. 10000 runs of each matching NVTX range)");
  (void)range_regex(arg.substr(c + 1));  // a malformed regex fails now
  return std::make_unique<Repeat>(static_cast<std::uint32_t>(k), arg.substr(c + 1));
}

}  // namespace

extern const TransformDef kRepeatTransform{"repeat", "K:REGEX", TransformDef::Arg::Required,
                                           "each instance of the matching NVTX ranges runs K times in all (copies are synthetic nodes)",
                                           parse};

}  // namespace bneck
