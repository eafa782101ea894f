#include "traces/ir.hpp"

#include <algorithm>
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
const char* const kApiClasses[] = {"other", "launch", "graph_launch", "memcpy_async", "memcpy_sync",
                                   "event_record", "stream_wait", "stream_sync", "event_sync", "device_sync"};
const char* const kMemcpyKinds[] = {"unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD",
                                    "DtoA", "DtoD", "HtoH", "PtoP", "UvmHtoD", "UvmDtoH", "UvmDtoD"};
const char* const kMemKinds[] = {"pageable", "pinned", "device", "array", "managed", "device_static",
                                 "managed_static", "unknown"};
}  // namespace

const char* to_string(OpKind k) { return kOpKinds[static_cast<int>(k)]; }
std::optional<OpKind> op_kind_from_string(std::string_view s) { return from_table<OpKind>(s, kOpKinds); }
const char* to_string(ApiClass c) { return kApiClasses[static_cast<int>(c)]; }
std::optional<ApiClass> api_class_from_string(std::string_view s) { return from_table<ApiClass>(s, kApiClasses); }
const char* to_string(MemcpyKind k) {
  auto i = static_cast<std::size_t>(k);
  return i < std::size(kMemcpyKinds) ? kMemcpyKinds[i] : "unknown";
}
std::optional<MemcpyKind> memcpy_kind_from_string(std::string_view s) {
  return from_table<MemcpyKind>(s, kMemcpyKinds);
}
const char* to_string(MemKind k) {
  auto i = static_cast<std::size_t>(k);
  return i < std::size(kMemKinds) ? kMemKinds[i] : "unknown";
}
std::optional<MemKind> mem_kind_from_string(std::string_view s) { return from_table<MemKind>(s, kMemKinds); }

void Trace::note(const std::string& key, Severity sev, const std::string& example, std::uint64_t n) {
  auto& a = anomalies[key];
  if (a.count == 0) { a.example = example; a.severity = sev; }
  a.count += n;
}

std::string Trace::lane_label(LaneId l) const {
  if (l >= lanes.size()) return "?";
  const Lane& ln = lanes[l];
  if (!ln.name.empty()) return ln.name;
  if (ln.kind == LaneKind::Thread) return "thread " + std::to_string(ln.native_id);
  std::string d = ln.device < devices.size() ? std::to_string(devices[ln.device].id) : "?";
  return "gpu" + d + " stream " + std::to_string(ln.native_id);
}

std::size_t Trace::device_op_count() const {
  return static_cast<std::size_t>(
      std::count_if(ops.begin(), ops.end(), [](const Op& o) { return is_device_op(o.kind); }));
}

void Trace::finalize() {
  auto less = [](const Op& a, const Op& b) {
    if (a.start != b.start) return a.start < b.start;
    if (a.kind != b.kind) return a.kind < b.kind;  // an API call before the op it launches
    return a.lane < b.lane;
  };
  const std::size_t n = ops.size();
  if (!std::is_sorted(ops.begin(), ops.end(), less)) {
    // Importers append one sorted table after another: merge the ascending runs (stable), then
    // apply the permutation in place, following its cycles, so no second copy of the ops exists.
    std::vector<OpId> perm(n);
    std::iota(perm.begin(), perm.end(), 0u);
    auto cmp = [&](OpId a, OpId b) { return less(ops[a], ops[b]); };
    std::vector<std::size_t> runs{0};
    for (std::size_t i = 1; i < n; ++i)
      if (less(ops[i], ops[i - 1])) runs.push_back(i);
    runs.push_back(n);
    if (runs.size() > 64) {
      std::stable_sort(perm.begin(), perm.end(), cmp);
    } else {
      while (runs.size() > 2) {
        std::vector<std::size_t> next{0};
        for (std::size_t r = 0; r + 2 < runs.size(); r += 2) {
          std::inplace_merge(perm.begin() + static_cast<long>(runs[r]), perm.begin() + static_cast<long>(runs[r + 1]),
                             perm.begin() + static_cast<long>(runs[r + 2]), cmp);
          next.push_back(runs[r + 2]);
        }
        if ((runs.size() - 1) % 2 == 1) next.push_back(runs.back());
        runs.swap(next);
      }
    }
    std::vector<OpId> inv(n);
    for (std::size_t i = 0; i < n; ++i) inv[perm[i]] = static_cast<OpId>(i);
    for (auto& o : ops)
      if (o.link != kNone) o.link = inv[o.link];
    for (auto& d : deps) { d.from = inv[d.from]; d.to = inv[d.to]; }
    // ops[i] must become old ops[perm[i]]: rotate each cycle once.
    std::vector<bool> done(n, false);
    for (std::size_t i = 0; i < n; ++i) {
      if (done[i] || perm[i] == i) { done[i] = true; continue; }
      Op tmp = ops[i];
      std::size_t j = i;
      while (true) {
        done[j] = true;
        std::size_t k = perm[j];
        if (k == i) { ops[j] = tmp; break; }
        ops[j] = ops[k];
        j = k;
      }
    }
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
    return a.start != b.start ? a.start < b.start : a.depth < b.depth;
  });
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
    if (o.end < o.start) bad(rec() + ": end before start");
    if (o.lane >= lanes.size()) bad(rec() + ": lane out of range");
    if (o.name >= strings.size()) bad(rec() + ": name out of range");
    bool is_thread = lanes[o.lane].kind == LaneKind::Thread;
    if ((o.kind == OpKind::Api) != is_thread) bad(rec() + ": api ops belong on threads, device ops on streams");
    if (o.link != kNone && (o.link >= ops.size() || ops[o.link].kind != OpKind::Api))
      bad(rec() + ": launched_by does not name an api op");
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
  return starts("nccl") || starts("rccl") || starts("void nccl") || name.find("ncclDevKernel") != std::string_view::npos ||
         name.find("ncclKernel") != std::string_view::npos || starts("nvshmem");
}

}  // namespace bneck
