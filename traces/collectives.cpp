#include "traces/collectives.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <set>

#include "sim/base/error.hpp"
#include "sim/base/strings.hpp"

namespace bneck {

const char* to_string(CollKind k) {
  static const char* const n[] = {"unknown",   "all_reduce", "all_gather", "reduce_scatter",
                                  "broadcast", "reduce",     "all_to_all", "send_recv"};
  return n[static_cast<int>(k)];
}

CollKind collective_kind_from_name(std::string_view name) {
  std::string n;
  for (char c : name)
    if (c != '_' && c != ' ' && c != '-') n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto has = [&](const char* s) { return n.find(s) != std::string::npos; };
  if (has("alltoall")) return CollKind::AllToAll;
  if (has("allreduce")) return CollKind::AllReduce;
  if (has("allgather")) return CollKind::AllGather;
  if (has("reducescatter")) return CollKind::ReduceScatter;
  if (has("broadcast")) return CollKind::Broadcast;
  if (has("sendrecv") || has("send") || has("recv")) return CollKind::SendRecv;
  if (has("reduce")) return CollKind::Reduce;
  return CollKind::Unknown;
}

Trace merge_traces(std::vector<Trace> parts) {
  if (parts.size() == 1) {
    Trace t = std::move(parts[0]);
    if (t.collectives.empty()) match_collectives(t);
    return t;
  }
  Trace m;
  m.measured = true;
  std::set<std::uint32_t> ranks_seen;
  for (std::size_t pi = 0; pi < parts.size(); ++pi) {
    Trace& p = parts[pi];
    if (m.format.empty())
      m.format = p.format;
    else if (m.format.find(p.format) == std::string::npos)
      m.format += " + " + p.format;
    m.measured = m.measured && p.measured;
    std::vector<StrId> str(p.strings.size());
    for (StrId s = 0; s < p.strings.size(); ++s) str[s] = m.strings.intern(p.strings.str(s));
    const auto d_off = static_cast<std::uint32_t>(m.devices.size()), pr_off = static_cast<std::uint32_t>(m.processes.size()),
               l_off = static_cast<std::uint32_t>(m.lanes.size()), o_off = static_cast<std::uint32_t>(m.ops.size()),
               k_off = static_cast<std::uint32_t>(m.kernels.size()), c_off = static_cast<std::uint32_t>(m.copies.size()),
               a_off = static_cast<std::uint32_t>(m.apis.size()), r_off = static_cast<std::uint32_t>(m.ranges.size());
    for (auto& d : p.devices) m.devices.push_back(d);
    for (auto pr : p.processes) {
      if (pr.rank == kNone || ranks_seen.count(pr.rank)) {
        if (pr.rank != kNone)
          m.note("merge: two files claim one rank; using the file's position", Severity::Warning,
                 p.source + " (rank " + std::to_string(pr.rank) + ")");
        pr.rank = static_cast<std::uint32_t>(pi);
      }
      ranks_seen.insert(pr.rank);
      m.processes.push_back(pr);
    }
    for (auto l : p.lanes) {
      l.process += pr_off;
      if (l.device != kNone) l.device += d_off;
      m.lanes.push_back(l);
    }
    for (auto o : p.ops) {
      o.name = str[o.name];
      o.lane += l_off;
      if (o.link != kNone) o.link += o_off;
      if (o.extra != kNone) o.extra += o.kind == OpKind::Kernel ? k_off : o.kind == OpKind::Api ? a_off : c_off;
      m.ops.push_back(o);
    }
    m.kernels.insert(m.kernels.end(), p.kernels.begin(), p.kernels.end());
    m.copies.insert(m.copies.end(), p.copies.begin(), p.copies.end());
    for (auto a : p.apis) {
      if (a.stream != kNone) a.stream += l_off;
      if (a.device != kNone) a.device += d_off;
      m.apis.push_back(a);
    }
    for (auto r : p.ranges) {
      r.name = str[r.name];
      r.lane += l_off;
      if (r.parent != kNone) r.parent += r_off;
      m.ranges.push_back(r);
    }
    for (auto [lane, start] : p.unnamed_ops) m.unnamed_ops.emplace_back(lane + l_off, start);
    for (auto d : p.deps) {
      d.from += o_off;
      d.to += o_off;
      m.deps.push_back(d);
    }
    for (auto& [k, a] : p.anomalies) {
      auto& x = m.anomalies[k];
      if (x.count == 0) {
        x.severity = a.severity;
        x.example = a.example;
      }
      x.count += a.count;
    }
  }
  // One source for reports: the files' common directory and their count.
  {
    std::vector<std::string> srcs;
    for (const auto& p : parts) srcs.push_back(p.source);
    std::string dir = srcs[0].substr(0, srcs[0].rfind('/') == std::string::npos ? 0 : srcs[0].rfind('/'));
    for (const auto& sname : srcs)
      while (!dir.empty() && sname.compare(0, dir.size() + 1, dir + "/") != 0)
        dir = dir.substr(0, dir.rfind('/') == std::string::npos ? 0 : dir.rfind('/'));
    m.source = (dir.empty() ? std::string(".") : dir) + "/ (" + std::to_string(srcs.size()) + " files)";
  }
  parts.clear();
  m.finalize();
  match_collectives(m);
  align_ranks(m);
  return m;
}

void align_ranks(Trace& t) {
  // Per rank, the offsets (reference end - its end) of the collectives it shares with the first
  // rank; point-to-point ones are left out (their peers may be ranks not traced).
  std::map<std::uint32_t, std::vector<TimeNs>> off;
  std::uint32_t ref = kNone;
  for (const Collective& c : t.collectives) {
    if (c.members.size() < 2 || c.kind == CollKind::SendRecv) continue;
    if (ref == kNone) ref = t.rank_of(t.ops[c.members[0]]);
    TimeNs ref_end = 0;
    bool has_ref = false;
    for (OpId m : c.members)
      if (t.rank_of(t.ops[m]) == ref) {
        ref_end = t.ops[m].end();
        has_ref = true;
      }
    if (!has_ref) continue;
    for (OpId m : c.members) off[t.rank_of(t.ops[m])].push_back(ref_end - t.ops[m].end());
  }
  std::map<std::uint32_t, TimeNs> shift;
  for (auto& [rank, v] : off) {
    if (rank == ref || v.size() < 3) continue;
    std::sort(v.begin(), v.end());
    TimeNs med = v[v.size() / 2];
    std::vector<TimeNs> dev;
    for (TimeNs x : v) dev.push_back(std::abs(x - med));
    std::sort(dev.begin(), dev.end());
    // Members of a collective end within microseconds of each other on one clock: a consistent
    // offset beyond 50 us is clock skew between hosts.
    if (std::abs(med) > 50 * kNsPerUs && dev[dev.size() / 2] < 10 * kNsPerUs) shift[rank] = med;
  }
  if (shift.empty()) return;
  for (Op& o : t.ops) {
    auto it = shift.find(t.rank_of(o));
    if (it != shift.end()) o.start += it->second;
  }
  for (Range& r : t.ranges) {
    auto it = shift.find(t.rank_of_lane(r.lane));
    if (it != shift.end()) {
      r.start += it->second;
      r.end += it->second;
    }
  }
  for (auto& [rank, s] : shift)
    t.note("merge: rank clocks aligned on their collectives' ends", Severity::Info,
           "rank " + std::to_string(rank) + " shifted by " + std::to_string(s) + " ns");
  // Shifting whole ranks keeps each rank's order; the global order is restored.
  t.collectives.clear();
  t.finalize();
  match_collectives(t);
}

namespace {

double elem_bytes(const std::string& type) {
  const std::string t = ascii_lower(type);
  if (t.find("bfloat16") != std::string::npos || t.find("half") != std::string::npos || t.find("short") != std::string::npos) return 2;
  if (t.find("double") != std::string::npos || t.find("long") != std::string::npos || t.find("int64") != std::string::npos) return 8;
  if (t.find("float8") != std::string::npos || t.find("char") != std::string::npos || t.find("byte") != std::string::npos ||
      t.find("bool") != std::string::npos || t.find("int8") != std::string::npos || t.find("uint8") != std::string::npos)
    return 1;
  return 4;  // float, int
}

std::string field(const std::string& text, const std::string& key) {
  auto p = text.find(", " + key + " = ");
  if (p == std::string::npos) return "";
  p += key.size() + 5;
  if (p < text.size() && text[p] == '[') {
    int depth = 0;
    for (std::size_t q = p; q < text.size(); ++q) {
      if (text[q] == '[')
        ++depth;
      else if (text[q] == ']' && --depth == 0)
        return text.substr(p, q - p + 1);
    }
    return text.substr(p);
  }
  auto e = text.find(", ", p);
  return text.substr(p, e == std::string::npos ? std::string::npos : e - p);
}

struct CommInfo {
  CollKind kind = CollKind::Unknown;
  Bytes bytes = 0;
  std::uint32_t group_size = 0;
  std::string group = "world";
};

// Communication ranges (annotations, record_param_comms) per thread lane, by start.
using CommRanges = std::map<LaneId, std::vector<std::size_t>>;

// record_param_comms' fields: the kind, the input's bytes, the group and its size.
void read_param_comms(const std::string& n, CommInfo& ci) {
  CollKind k = collective_kind_from_name(field(n, "collective"));
  if (k != CollKind::Unknown) ci.kind = k;
  double ne = std::atof(field(n, "in_nelems").c_str());
  if (ne > 0) ci.bytes = static_cast<Bytes>(ne * elem_bytes(field(n, "dtype")));
  std::string g = field(n, "group"), gr = field(n, "group_ranks");
  if (!g.empty())
    ci.group = g;
  else if (gr.size() > 2)
    ci.group = gr;
  double gs = std::atof(field(n, "group_size").c_str());
  if (gs > 0)
    ci.group_size = static_cast<std::uint32_t>(gs);
  else if (gr.size() > 2)
    ci.group_size = static_cast<std::uint32_t>(std::count(gr.begin(), gr.end(), ',') + 1);
}

// An nccl: annotation's bytes: its first tensor's elements ("sizes") times the dtype's bytes; 0 if none.
Bytes annotation_bytes(const std::string& n) {
  std::string sz = field(n, "sizes");
  double ne = 1;
  bool any = false;
  for (std::size_t q = 0; q < sz.size();) {  // first tensor's elements
    if (std::isdigit(static_cast<unsigned char>(sz[q]))) {
      std::size_t e = q;
      while (e < sz.size() && std::isdigit(static_cast<unsigned char>(sz[e]))) ++e;
      ne *= std::atof(sz.substr(q, e - q).c_str());
      any = true;
      q = e;
    } else if (sz[q] == ']' && any) {
      break;
    } else {
      ++q;
    }
  }
  return any ? static_cast<Bytes>(ne * elem_bytes(field(n, "dtype"))) : 0;
}

// A communication kernel's kind, size and group: from its name, refined by the ranges around its launch.
CommInfo info_of(const Trace& t, const CommRanges& comm_ranges, OpId kern) {
  CommInfo ci;
  ci.kind = collective_kind_from_name(t.name(t.ops[kern]));
  const Op& k_op = t.ops[kern];
  if (k_op.link == kNone) return ci;
  const Op& api = t.ops[k_op.link];
  auto it = comm_ranges.find(api.lane);
  if (it == comm_ranges.end()) return ci;
  const auto& v = it->second;
  auto hi = std::upper_bound(v.begin(), v.end(), api.start, [&](TimeNs s, std::size_t r) { return s < t.ranges[r].start; });
  // The innermost enclosing ones: record_param_comms (sizes, group) and the nccl: annotation (kind, sizes).
  bool have_param = false, have_anno = false;
  for (auto p = hi; p != v.begin() && !(have_param && have_anno);) {
    --p;
    const Range& r = t.ranges[*p];
    if (api.start - r.start > 60 * kNsPerS) break;
    if (r.end < api.start) continue;
    const std::string& n = t.strings.str(r.name);
    if (n.rfind("record_param_comms", 0) == 0 && !have_param) {
      have_param = true;
      read_param_comms(n, ci);
    } else if (n.rfind("nccl:", 0) == 0 && !have_anno) {
      have_anno = true;
      CollKind k = collective_kind_from_name(n.substr(5, n.find(',') == std::string::npos ? std::string::npos : n.find(',') - 5));
      if (k != CollKind::Unknown && !have_param) ci.kind = k;
      if (ci.bytes == 0) ci.bytes = annotation_bytes(n);
    }
  }
  return ci;
}

// One group's collectives: the i-th kernel of every rank in the group, while their kinds agree.
void match_group(Trace& t, const std::string& group, const std::map<std::uint32_t, std::vector<std::pair<OpId, CommInfo>>>& by_rank,
                 std::uint32_t world_ranks) {
  std::size_t n = SIZE_MAX, longest = 0;
  for (auto& [r, v] : by_rank) {
    n = std::min(n, v.size());
    longest = std::max(longest, v.size());
  }
  if (longest != n)
    t.note("collectives: ranks issued different numbers of collectives in a group; the extra ones stay unmatched", Severity::Warning,
           "group " + group + ": " + std::to_string(n) + " vs " + std::to_string(longest));
  for (std::size_t i = 0; i < n; ++i) {
    Collective c;
    c.group = group;
    c.seq = static_cast<std::uint32_t>(i);
    bool mismatch = false;
    for (auto& [r, v] : by_rank) {
      const CommInfo& ci = v[i].second;
      if (c.members.empty()) {
        c.kind = ci.kind;
        c.bytes = ci.bytes;
        c.group_size = ci.group_size ? ci.group_size : (group == "world" ? world_ranks : 0);
      } else if (ci.kind != c.kind && ci.kind != CollKind::Unknown && c.kind != CollKind::Unknown) {
        mismatch = true;
      }
      c.bytes = std::max(c.bytes, ci.bytes);
      c.members.push_back(v[i].first);
    }
    if (mismatch) {
      t.note("collectives: kinds differ at the same position of a group; matching of that group stopped", Severity::Warning,
             "group " + group + " position " + std::to_string(i));
      break;
    }
    if (c.group_size == 0) c.group_size = static_cast<std::uint32_t>(c.members.size());
    t.collectives.push_back(std::move(c));
  }
}

}  // namespace

void match_collectives(Trace& t) {
  t.collectives.clear();
  // Communication ranges (annotations, record_param_comms) per thread lane, by start.
  CommRanges comm_ranges;
  for (std::size_t i = 0; i < t.ranges.size(); ++i) {
    const std::string& n = t.strings.str(t.ranges[i].name);
    if (n.rfind("nccl:", 0) == 0 || n.rfind("record_param_comms", 0) == 0 || n.rfind("c10d::", 0) == 0)
      comm_ranges[t.ranges[i].lane].push_back(i);
  }
  for (auto& [l, v] : comm_ranges)
    std::sort(v.begin(), v.end(), [&](std::size_t a, std::size_t b) { return t.ranges[a].start < t.ranges[b].start; });
  // Per rank (process), its communication kernels in launch order.
  std::map<std::uint32_t, std::vector<OpId>> per_rank;
  for (OpId i = 0; i < t.ops.size(); ++i)
    if (t.ops[i].kind == OpKind::Kernel && (t.ops[i].flags & Op::kFlagNccl)) per_rank[t.rank_of(t.ops[i])].push_back(i);
  if (per_rank.empty()) return;
  auto launch_time = [&](OpId k) { return t.ops[k].link != kNone ? t.ops[t.ops[k].link].start : t.ops[k].start; };
  // group -> rank -> sequence of (kernel, info)
  std::map<std::string, std::map<std::uint32_t, std::vector<std::pair<OpId, CommInfo>>>> seqs;
  for (auto& [rank, ks] : per_rank) {
    std::stable_sort(ks.begin(), ks.end(), [&](OpId a, OpId b) { return launch_time(a) < launch_time(b); });
    for (OpId k : ks) {
      CommInfo ci = info_of(t, comm_ranges, k);
      seqs[ci.group][rank].emplace_back(k, ci);
    }
  }
  // The world group: the traced ranks, or the job's size where a rank's trace says it (one rank's
  // file of an 8-rank job holds one member of each collective, which ran on 8).
  auto world = static_cast<std::uint32_t>(per_rank.size());
  for (const Process& p : t.processes) world = std::max(world, p.world_size);
  for (auto& [group, by_rank] : seqs) match_group(t, group, by_rank, world);
}

}  // namespace bneck
