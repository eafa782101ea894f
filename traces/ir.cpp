#include "traces/ir.hpp"

#include <algorithm>
#include <cctype>
#include <numeric>

#include "sim/base/error.hpp"

namespace bneck {
namespace {
template <typename E, std::size_t N>
std::optional<E> from_table(std::string_view s, const char* const (&names)[N]) {
  for (std::size_t i = 0; i < N; ++i)
    if (s == names[i]) return static_cast<E>(i);
  return std::nullopt;
}
const char* const kOpKinds[] = {"api", "kernel", "memcpy", "memset"};
const char* const kApiClasses[] = {"other",        "launch",      "graph_launch", "memcpy_async", "memcpy_sync",
                                   "event_record", "stream_wait", "stream_sync",  "event_sync",   "device_sync"};
const char* const kMemcpyKinds[] = {"unknown", "HtoD", "DtoH", "HtoA", "AtoH",    "AtoA",    "AtoD",
                                    "DtoA",    "DtoD", "HtoH", "PtoP", "UvmHtoD", "UvmDtoH", "UvmDtoD"};
const char* const kMemKinds[] = {"pageable", "pinned", "device", "array", "managed", "device_static", "managed_static", "unknown"};
}  // namespace

const char* to_string(OpKind k) { return kOpKinds[static_cast<int>(k)]; }
std::optional<OpKind> op_kind_from_string(std::string_view s) { return from_table<OpKind>(s, kOpKinds); }
const char* to_string(ApiClass c) { return kApiClasses[static_cast<int>(c)]; }
std::optional<ApiClass> api_class_from_string(std::string_view s) { return from_table<ApiClass>(s, kApiClasses); }
const char* to_string(MemcpyKind k) {
  auto i = static_cast<std::size_t>(k);
  return i < std::size(kMemcpyKinds) ? kMemcpyKinds[i] : "unknown";
}
std::optional<MemcpyKind> memcpy_kind_from_string(std::string_view s) { return from_table<MemcpyKind>(s, kMemcpyKinds); }
const char* to_string(MemKind k) {
  auto i = static_cast<std::size_t>(k);
  return i < std::size(kMemKinds) ? kMemKinds[i] : "unknown";
}
std::optional<MemKind> mem_kind_from_string(std::string_view s) { return from_table<MemKind>(s, kMemKinds); }

void Trace::note(const std::string& key, Severity sev, const std::string& example, std::uint64_t n) {
  auto& a = anomalies[key];
  if (a.count == 0) {
    a.example = example;
    a.severity = sev;
  }
  a.count += n;
}

std::string Trace::lane_label(LaneId l) const {
  if (l >= lanes.size()) return "?";
  const Lane& ln = lanes[l];
  // Several ranks: say whose lane it is.
  std::string who = processes.size() > 1 ? "rank " + std::to_string(rank_of_lane(l)) + " " : "";
  if (!ln.name.empty()) return who + ln.name;
  if (ln.kind == LaneKind::Thread) return who + "thread " + std::to_string(ln.native_id);
  std::string d = ln.device < devices.size() ? std::to_string(devices[ln.device].id) : "?";
  return who + "gpu" + d + " stream " + std::to_string(ln.native_id);
}

std::size_t Trace::device_op_count() const {
  return static_cast<std::size_t>(std::count_if(ops.begin(), ops.end(), [](const Op& o) { return is_device_op(o.kind); }));
}

std::size_t LaunchInterner::Hash::operator()(const LaunchConfig& c) const {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the fields
  for (std::uint64_t v : {std::uint64_t{c.grid_x}, std::uint64_t{c.grid_yz[0]}, std::uint64_t{c.grid_yz[1]}, std::uint64_t{c.block[0]},
                          std::uint64_t{c.block[1]}, std::uint64_t{c.block[2]}, std::uint64_t{c.registers}, std::uint64_t{c.static_smem},
                          std::uint64_t{c.dynamic_smem}})
    h = (h ^ v) * 1099511628211ull;
  return static_cast<std::size_t>(h);
}

bool LaunchInterner::Eq::operator()(const LaunchConfig& a, const LaunchConfig& b) const {
  return a.grid_x == b.grid_x && a.grid_yz[0] == b.grid_yz[0] && a.grid_yz[1] == b.grid_yz[1] && a.block[0] == b.block[0] &&
         a.block[1] == b.block[1] && a.block[2] == b.block[2] && a.registers == b.registers && a.static_smem == b.static_smem &&
         a.dynamic_smem == b.dynamic_smem;
}

std::uint32_t LaunchInterner::intern(std::vector<LaunchConfig>& table, const LaunchConfig& lc) {
  // Looked up first: emplace builds a node (an allocation) before it finds the key there, and nearly
  // every launch is one seen before.
  if (auto it = index_.find(lc); it != index_.end()) return it->second;
  index_.emplace(lc, static_cast<std::uint32_t>(table.size()));
  table.push_back(lc);
  return static_cast<std::uint32_t>(table.size() - 1);
}

void Trace::finalize() {
  // Timestamps: every importer's ops and ranges must lie within 2^62 ns (146 years) of the trace's
  // clock zero, so that no later sum of times (ends, gaps, delays, spans) can overflow: a trace
  // outside is rejected, naming the op (signed overflow gave nonsense figures with exit 0).
  constexpr TimeNs kLimit = TimeNs{1} << 62;
  for (std::size_t i = 0; i < ops.size(); ++i)
    if (ops[i].start < -kLimit || ops[i].start > kLimit || ops[i].end() > kLimit)
      throw InputError(source, "op " + std::to_string(i) + " (" + name(ops[i]) + "): timestamp " + std::to_string(ops[i].start) +
                                   " ns is more than 2^62 ns (146 years) from the trace's clock zero");
  for (std::size_t i = 0; i < ranges.size(); ++i)
    if (ranges[i].start < -kLimit || ranges[i].start > kLimit || ranges[i].end < -kLimit || ranges[i].end > kLimit)
      throw InputError(source, "range " + std::to_string(i) + " (" + strings.str(ranges[i].name) +
                                   "): timestamp more than 2^62 ns (146 years) from the trace's clock zero");
  auto less = [](const Op& a, const Op& b) {
    if (a.start != b.start) return a.start < b.start;
    if (a.kind != b.kind) return a.kind < b.kind;  // an API call before the op it launches
    return a.lane < b.lane;
  };
  const std::size_t n = ops.size();
  // The first op of each run of ops already in order (an importer appends a few ordered tables:
  // an nsys export's API calls, then its kernels), up to kMaxRuns.
  constexpr std::size_t kMaxRuns = 64;
  std::vector<std::uint32_t> runs{0};
  for (std::size_t i = 1; i < n && runs.size() <= kMaxRuns; ++i)
    if (less(ops[i], ops[i - 1])) runs.push_back(static_cast<std::uint32_t>(i));
  if (runs.size() > 1) {
    // The order is of keys (start, kind, lane, position); the ops are gathered into it below.
    struct Key {
      TimeNs start;
      std::uint32_t tie;  // kind, then lane
      OpId idx;
    };
    auto kless = [](const Key& a, const Key& b) {
      return a.start != b.start ? a.start < b.start : a.tie != b.tie ? a.tie < b.tie : a.idx < b.idx;
    };
    auto key_of = [&](std::size_t i) {
      const Op& o = ops[i];
      return Key{o.start, (static_cast<std::uint32_t>(o.kind) << 30) | std::min<std::uint32_t>(o.lane, (1u << 30) - 1),
                 static_cast<OpId>(i)};
    };
    // Runs are merged with a heap over their positions, comparing the ops' keys made as needed. Past kMaxRuns, lanes are (each lane, a
    // stream or a thread, is nearly always in time order already): their keys grouped first (counting sort; each lane's keys contiguous, so
    // the merge reads them in order), a lane out of order sorted first.
    std::vector<OpId> perm;
    perm.reserve(n);
    if (runs.size() <= kMaxRuns) {
      auto before = [&](std::uint32_t i, std::uint32_t j) { return kless(key_of(i), key_of(j)); };
      using Cursor = std::pair<std::uint32_t, std::uint32_t>;  // position, end
      std::vector<Cursor> heap;
      for (std::size_t r = 0; r < runs.size(); ++r)
        heap.emplace_back(runs[r], r + 1 < runs.size() ? runs[r + 1] : static_cast<std::uint32_t>(n));
      if (heap.size() == 2) {  // two runs: a plain merge
        auto [a, a_end] = heap[0];
        auto [b, b_end] = heap[1];
        while (a < a_end && b < b_end) perm.push_back(before(b, a) ? b++ : a++);
        while (a < a_end) perm.push_back(a++);
        while (b < b_end) perm.push_back(b++);
      } else {
        auto heap_less = [&](const Cursor& x, const Cursor& y) { return before(y.first, x.first); };
        std::make_heap(heap.begin(), heap.end(), heap_less);
        while (!heap.empty()) {
          std::pop_heap(heap.begin(), heap.end(), heap_less);
          Cursor& c = heap.back();
          perm.push_back(c.first);
          if (++c.first < c.second)
            std::push_heap(heap.begin(), heap.end(), heap_less);
          else
            heap.pop_back();
        }
      }
    } else {
      std::vector<std::uint32_t> offset(lanes.size() + 2, 0);
      for (const Op& o : ops) offset[std::min<std::size_t>(o.lane, lanes.size()) + 1]++;
      for (std::size_t l = 1; l < offset.size(); ++l) offset[l] += offset[l - 1];
      std::vector<Key> grouped(n);
      {
        std::vector<std::uint32_t> fill(offset.begin(), offset.end() - 1);
        for (std::size_t i = 0; i < n; ++i) grouped[fill[std::min<std::size_t>(ops[i].lane, lanes.size())]++] = key_of(i);
      }
      using Cursor = std::pair<std::uint32_t, std::uint32_t>;  // position, end
      auto heap_less = [&](const Cursor& x, const Cursor& y) { return kless(grouped[y.first], grouped[x.first]); };
      std::vector<Cursor> heap;
      for (std::size_t l = 0; l + 1 < offset.size(); ++l) {
        auto b = grouped.begin() + offset[l], e = grouped.begin() + offset[l + 1];
        if (!std::is_sorted(b, e, kless)) std::sort(b, e, kless);
        if (b != e) heap.emplace_back(offset[l], offset[l + 1]);
      }
      std::make_heap(heap.begin(), heap.end(), heap_less);
      while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), heap_less);
        Cursor& c = heap.back();
        perm.push_back(grouped[c.first].idx);
        if (++c.first < c.second)
          std::push_heap(heap.begin(), heap.end(), heap_less);
        else
          heap.pop_back();
      }
    }
    std::vector<OpId> inv(n);
    for (std::size_t i = 0; i < n; ++i) inv[perm[i]] = static_cast<OpId>(i);
    for (auto& o : ops)
      if (o.link != kNone) o.link = inv[o.link];
    for (auto& d : deps) {
      d.from = inv[d.from];
      d.to = inv[d.to];
    }
    inv.clear();
    inv.shrink_to_fit();
    // ops[i] must become old ops[perm[i]]: a gather into a new array. Its reads are independent,
    // so their cache misses overlap; following the permutation's cycles in place instead is one
    // chain of dependent misses (2x slower on 4 M ops) for 32 B an op less at this moment.
    std::vector<Op> sorted;
    sorted.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      if (i + 16 < n) __builtin_prefetch(&ops[perm[i + 16]]);
      sorted.push_back(ops[perm[i]]);
    }
    ops.swap(sorted);
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.start != b.start ? a.start < b.start : a.depth < b.depth; });
  // Parents and depths from nesting on each thread (ranges sorted by start; a stack per lane).
  std::map<LaneId, std::vector<std::uint32_t>> stacks;
  for (std::uint32_t i = 0; i < ranges.size(); ++i) {
    auto& st = stacks[ranges[i].lane];
    while (!st.empty() && ranges[st.back()].end <= ranges[i].start) st.pop_back();
    ranges[i].parent = st.empty() ? kNone : st.back();
    ranges[i].depth = static_cast<std::uint16_t>(st.size());
    st.push_back(i);
  }
  validate();
}

void Trace::validate() const {
  auto bad = [&](const std::string& what) { throw InputError(source, what); };
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& o = ops[i];
    auto rec = [&] { return "op " + std::to_string(i) + " (" + strings.str(o.name) + ")"; };

    if (o.lane >= lanes.size()) bad(rec() + ": lane out of range");
    if (o.name >= strings.size()) bad(rec() + ": name out of range");
    bool is_thread = lanes[o.lane].kind == LaneKind::Thread;
    if ((o.kind == OpKind::Api) != is_thread) bad(rec() + ": api ops belong on threads, device ops on streams");
    if (o.link != kNone && (o.link >= ops.size() || ops[o.link].kind != OpKind::Api)) bad(rec() + ": launched_by does not name an api op");
    if (o.extra != kNone) {
      std::size_t lim = o.kind == OpKind::Kernel ? kernels.size() : o.kind == OpKind::Api ? apis.size() : copies.size();
      if (o.extra >= lim) bad(rec() + ": detail index out of range");
    }
  }
  for (const auto& a : apis)
    if (a.stream != kNone && (a.stream >= lanes.size() || lanes[a.stream].kind != LaneKind::Stream))
      bad("api record names a stream lane that does not exist");
  for (const auto& l : lanes) {
    if (l.process >= processes.size() && !processes.empty()) bad("lane names a process that does not exist");
    if (l.device != kNone && l.device >= devices.size()) bad("lane names a device that does not exist");
  }
  for (const auto& d : deps)
    if (d.from >= ops.size() || d.to >= ops.size() || d.from == d.to) bad("dependency names a missing op");
  for (const auto& r : ranges)
    if (r.lane >= lanes.size() || r.end < r.start || r.name >= strings.size()) bad("malformed range");
}

bool is_comm_kernel_name(std::string_view name) {
  auto starts = [&](std::string_view p) { return name.substr(0, p.size()) == p; };
  auto has = [&](std::string_view p) { return name.find(p) != std::string_view::npos; };
  // DeepEP's expert-parallel all-to-all kernels (dispatch, combine and their notify barriers) live in
  // its internode, internode_ll and intranode namespaces (deep_ep::, or dpsk::ep:: in DeepSeek's
  // published profiles); its layout kernel, in another namespace, is compute.
  return starts("nccl") || starts("rccl") || starts("void nccl") || has("ncclDevKernel") || has("ncclKernel") || starts("nvshmem") ||
         has("ep::internode") || has("ep::intranode");
}

std::string canonical_kernel_name(std::string_view name) {
  std::string n(name);
  auto lower_starts = [&](const char* p) {
    for (std::size_t i = 0; p[i]; ++i)
      if (i >= n.size() || std::tolower(static_cast<unsigned char>(n[i])) != p[i]) return false;
    return true;
  };
  if (lower_starts("memset")) return "memset";
  if (lower_starts("memcpy")) {
    auto sp = n.find(' ');
    std::string k = sp == std::string::npos ? "" : n.substr(sp + 1, n.find(' ', sp + 1) - sp - 1);
    return "memcpy " + k;
  }
  auto replace_all = [&](const std::string& a, const std::string& b) {
    for (std::size_t p = n.find(a); p != std::string::npos; p = n.find(a, p + b.size())) n.replace(p, a.size(), b);
  };
  replace_all("(anonymous namespace)", "anon");
  replace_all("<unnamed>", "anon");
  for (const char* cast : {"(int)", "(unsigned int)", "(long)", "(unsigned long)", "(char)", "(bool)", "(short)", "(unsigned char)"})
    replace_all(cast, "");
  replace_all("void ", "");
  // Template arguments are spelled differently by the two demanglers (3ul / 3, false / 0, lambda
  // names): keep the name up to its template or argument list.
  for (std::size_t i = 1; i < n.size(); ++i)
    if (n[i] == '<' || n[i] == '(') {
      n.resize(i);
      break;
    }
  n.erase(std::remove_if(n.begin(), n.end(), [](char c) { return c == ' '; }), n.end());
  return n;
}

}  // namespace bneck
