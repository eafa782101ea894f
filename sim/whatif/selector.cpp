#include "sim/whatif/selector.hpp"

#include <algorithm>

#include "sim/analysis/analysis.hpp"
#include "sim/base/error.hpp"

namespace bneck {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else
      cur += c;
  }
  out.push_back(cur);
  return out;
}

std::uint64_t parse_uint(const std::string& v, const std::string& term) {
  if (v.empty() || !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }) || v.size() > 18)
    throw InputError("selector term '" + term + "': expected a non-negative integer");
  return std::stoull(v);
}

}  // namespace

Selector Selector::parse(const std::string& text) {
  Selector s;
  s.text_ = text;
  if (text.empty()) throw InputError("empty selector");
  for (const std::string& term : split(text, '&')) {
    Term t{};
    auto op = term.find_first_of("~=<>");
    if (op == std::string::npos || op == 0) throw InputError("selector term '" + term + "': expected KEY~REGEX, KEY=V, dur>T or dur<T");
    std::string key = term.substr(0, op), val = term.substr(op + 1);
    char c = term[op];
    try {
      if (key == "name" && c == '~') {
        t.kind = Term::Name;
        t.re = Regex(val);
      } else if (key == "range" && c == '~') {
        t.kind = Term::Range;
        t.re = Regex(val);
      } else if (key == "kind" && c == '=') {
        t.kind = Term::KindIs;
        if (val != "kernel" && val != "memcpy" && val != "memset" && val != "collective" && val != "api")
          throw InputError("selector term '" + term + "': kind must be kernel, memcpy, memset, collective or api");
        t.value = val;
      } else if (key == "stream" && c == '=') {
        t.kind = Term::Stream;
        t.ids = {parse_uint(val, term)};
      } else if (key == "device" && c == '=') {
        t.kind = Term::Device;
        t.ids = {parse_uint(val, term)};
      } else if (key == "rank" && c == '=') {
        t.kind = Term::Rank;
        t.ids = {parse_uint(val, term)};
      } else if (key == "id" && c == '=') {
        t.kind = Term::Ids;
        for (const auto& x : split(val, ',')) t.ids.push_back(parse_uint(x, term));
        std::sort(t.ids.begin(), t.ids.end());
      } else if (key == "dur" && (c == '>' || c == '<')) {
        t.kind = c == '>' ? Term::DurGt : Term::DurLt;
        t.dur = parse_duration(val);
      } else {
        throw InputError("selector term '" + term +
                         "': unknown key or operator (name~, kind=, stream=, device=, rank=, range~, dur>, dur<, id=)");
      }
    } catch (const InputError& e) { throw InputError("selector term '" + term + "': " + e.what()); }
    s.terms_.push_back(std::move(t));
  }
  return s;
}

void Selector::bind(const Trace& t) {
  t_ = &t;
  in_range_.clear();
  for (const Term& term : terms_) {
    if (term.kind != Term::Range) continue;
    std::vector<bool> hit(t.ops.size(), false);
    RangeIndex idx(t);
    std::vector<OpId> ops;
    for (std::size_t ri : idx.match(term.re)) {
      ops.clear();
      idx.device_ops(ri, ops);
      for (OpId o : ops) hit[o] = true;
      ops.clear();
      idx.api_ops(ri, ops);
      for (OpId o : ops) hit[o] = true;
    }
    if (in_range_.empty())
      in_range_ = std::move(hit);
    else
      for (std::size_t i = 0; i < hit.size(); ++i) in_range_[i] = in_range_[i] && hit[i];
  }
}

bool Selector::matches(OpId id) const {
  const Trace& t = *t_;
  const Op& o = t.ops[id];
  for (const Term& term : terms_) {
    switch (term.kind) {
      case Term::Name:
        if (!term.re.search(t.name(o))) return false;
        break;
      case Term::KindIs:
        if (term.value == "collective") {
          if (!(o.flags & Op::kFlagNccl)) return false;
        } else if (term.value != to_string(o.kind) || (o.flags & Op::kFlagNccl)) {  // kernel: a collective's is not one
          return false;
        }
        break;
      case Term::Stream:
        if (o.kind == OpKind::Api || t.lanes[o.lane].native_id != term.ids[0]) return false;
        break;
      case Term::Device: {
        std::uint32_t d = t.lanes[o.lane].device;
        if (d == kNone || t.devices[d].id != term.ids[0]) return false;
        break;
      }
      case Term::Rank: {
        const Process& p = t.processes[t.lanes[o.lane].process];
        std::uint64_t rank = p.rank == kNone ? t.lanes[o.lane].process : p.rank;
        if (rank != term.ids[0]) return false;
        break;
      }
      case Term::Range:
        if (in_range_.empty() || !in_range_[id]) return false;
        break;
      case Term::DurGt:
        if (!(o.duration() > term.dur)) return false;
        break;
      case Term::DurLt:
        if (!(o.duration() < term.dur)) return false;
        break;
      case Term::Ids:
        if (!std::binary_search(term.ids.begin(), term.ids.end(), static_cast<std::uint64_t>(id))) return false;
        break;
    }
  }
  return true;
}

}  // namespace bneck
