// Trace IR: what a profiled (or hand-written) run consists of, independent of the trace format.
//
// Compact by design (50 million ops in a few GB): an Op is 32 bytes; kind-specific details live in
// side tables indexed by Op::extra; names are interned. Ops are host API calls (on a thread lane)
// and device ops (kernel, memcpy, memset on a stream lane). A device op records the API call that
// launched it (Op::link). Synchronization and event semantics live in ApiInfo records.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/base/strings.hpp"
#include "sim/base/units.hpp"

namespace bneck {

using OpId = std::uint32_t;
using LaneId = std::uint32_t;
inline constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

enum class OpKind : std::uint8_t { Api = 0, Kernel = 1, Memcpy = 2, Memset = 3 };
const char* to_string(OpKind k);
std::optional<OpKind> op_kind_from_string(std::string_view s);
inline bool is_device_op(OpKind k) { return k != OpKind::Api; }

// What a host API call does, as far as dependencies are concerned.
enum class ApiClass : std::uint8_t {
  Other = 0,        // CPU time only
  Launch = 1,       // kernel launch (runtime or driver)
  GraphLaunch = 2,  // cudaGraphLaunch: all node ops share its correlation id
  MemcpyAsync = 3,  // asynchronous copy/memset submission
  MemcpySync = 4,   // blocking copy/memset: returns after its device op ends
  EventRecord = 5,  // ApiInfo::stream, ApiInfo::event
  StreamWait = 6,   // cudaStreamWaitEvent: ApiInfo::stream waits for ApiInfo::event
  StreamSync = 7,   // cudaStreamSynchronize: ApiInfo::stream
  EventSync = 8,    // cudaEventSynchronize: ApiInfo::event
  DeviceSync = 9,   // cudaDeviceSynchronize / cuCtxSynchronize: ApiInfo::device
};
const char* to_string(ApiClass c);
std::optional<ApiClass> api_class_from_string(std::string_view s);
// A call that blocks the host until device work ends: a stream, event or device synchronize, or a
// blocking copy. No CUDA graph captures it; its time is waiting, not the host's work.
constexpr bool blocks_host(ApiClass c) {
  return c == ApiClass::StreamSync || c == ApiClass::EventSync || c == ApiClass::DeviceSync || c == ApiClass::MemcpySync;
}

enum class MemcpyKind : std::uint8_t {
  Unknown = 0,
  HtoD = 1,
  DtoH = 2,
  HtoA = 3,
  AtoH = 4,
  AtoA = 5,
  AtoD = 6,
  DtoA = 7,
  DtoD = 8,
  HtoH = 9,
  PtoP = 10,
  UvmHtoD = 11,
  UvmDtoH = 12,
  UvmDtoD = 13
};
const char* to_string(MemcpyKind k);
std::optional<MemcpyKind> memcpy_kind_from_string(std::string_view s);
enum class MemKind : std::uint8_t {
  Pageable = 0,
  Pinned = 1,
  Device = 2,
  Array = 3,
  Managed = 4,
  DeviceStatic = 5,
  ManagedStatic = 6,
  Unknown = 7
};
const char* to_string(MemKind k);
std::optional<MemKind> mem_kind_from_string(std::string_view s);

// 32 bytes. Times are measured nanoseconds; in a hand-written workload, start is 0 unless given
// and the duration is the op's. The duration is stored in 32 bits: nanoseconds up to 2.147 s,
// beyond that whole microseconds (up to 35 minutes; longer is clamped and counted as an anomaly).
struct Op {
  TimeNs start = 0;
  StrId name = 0;
  LaneId lane = kNone;          // thread lane for Api ops, stream lane for device ops
  std::uint32_t link = kNone;   // device op: id of the launching Api op; Api op: kNone
  std::uint32_t extra = kNone;  // index into kernels / copies / apis side tables
  OpKind kind = OpKind::Api;
  std::uint8_t flags = 0;  // Op::kFlag*
  std::uint16_t sub = 0;   // Api ops: ApiClass

  TimeNs duration() const { return (dur_ & kDurUs) ? static_cast<TimeNs>(dur_ & ~kDurUs) * 1000 : static_cast<TimeNs>(dur_); }
  TimeNs end() const {  // saturates instead of overflowing (import rejects such ops, see Trace::finalize)
    TimeNs e = 0;
    return __builtin_add_overflow(start, duration(), &e) ? std::numeric_limits<TimeNs>::max() : e;
  }
  // Returns false if the duration had to be clamped (negative, or over 35 minutes).
  bool set_duration(TimeNs d) {
    if (d < 0) {
      dur_ = 0;
      return false;
    }
    if (d <= static_cast<TimeNs>(~kDurUs)) {
      dur_ = static_cast<std::uint32_t>(d);
      return true;
    }
    TimeNs us = d / 1000 + (d % 1000 >= 500 ? 1 : 0);  // rounded, without overflowing near the int64 limit
    bool ok = us <= static_cast<TimeNs>(~kDurUs);
    dur_ = kDurUs | static_cast<std::uint32_t>(std::min<TimeNs>(us, ~kDurUs));
    return ok;
  }
  bool set_end(TimeNs e) {  // false (duration 0) when end - start does not fit: extreme timestamps
    TimeNs d = 0;
    if (__builtin_sub_overflow(e, start, &d)) return set_duration(-1);
    return set_duration(d);
  }
  ApiClass api_class() const { return kind == OpKind::Api ? static_cast<ApiClass>(sub) : ApiClass::Other; }
  void set_api_class(ApiClass c) { sub = static_cast<std::uint16_t>(c); }
  static constexpr std::uint8_t kFlagNccl = 1;       // communication kernel (NCCL/RCCL)
  static constexpr std::uint8_t kFlagGraphNode = 2;  // executed as a CUDA graph node
  static constexpr std::uint8_t kFlagReleased = 4;   // workload op with an explicit release time (start)

 private:
  static constexpr std::uint32_t kDurUs = 0x80000000u;
  std::uint32_t dur_ = 0;
};
static_assert(sizeof(Op) == 32, "Op must stay compact");

struct LaunchConfig {  // 24 bytes; grid y and z are at most 65535 in CUDA
  std::uint32_t grid_x = 1;
  std::uint16_t grid_yz[2] = {1, 1};
  std::uint32_t grid(int i) const { return i == 0 ? grid_x : grid_yz[i - 1]; }
  void set_grid(int i, std::uint64_t v) {
    if (i == 0)
      grid_x = static_cast<std::uint32_t>(std::min<std::uint64_t>(v, 0xFFFFFFFFu));
    else
      grid_yz[i - 1] = static_cast<std::uint16_t>(std::min<std::uint64_t>(v, 0xFFFFu));
  }
  std::uint16_t block[3] = {1, 1, 1};
  std::uint16_t registers = 0;     // per thread
  std::uint32_t static_smem = 0;   // bytes per block
  std::uint32_t dynamic_smem = 0;  // bytes per block
};
static_assert(sizeof(LaunchConfig) == 24, "LaunchConfig must stay compact");

// Importers: the trace's kernels side table holds each distinct launch configuration once (a
// trace of millions of kernels has a few thousand), and each kernel op's `extra` points at its
// configuration. The interner lives while a trace is imported.
class LaunchInterner {
 public:
  std::uint32_t intern(std::vector<LaunchConfig>& table, const LaunchConfig& lc);

 private:
  struct Hash {
    std::size_t operator()(const LaunchConfig& c) const;
  };
  struct Eq {
    bool operator()(const LaunchConfig& a, const LaunchConfig& b) const;
  };
  std::unordered_map<LaunchConfig, std::uint32_t, Hash, Eq> index_;
};

struct CopyInfo {  // memcpy and memset
  Bytes bytes = 0;
  MemcpyKind copy_kind = MemcpyKind::Unknown;
  MemKind src = MemKind::Unknown;
  MemKind dst = MemKind::Unknown;
  // Either side in pageable host memory (the copy goes through a staging buffer; the call blocks).
  bool pageable() const { return src == MemKind::Pageable || dst == MemKind::Pageable; }
  // Between the host and a device (UVM migrations included).
  bool host_device() const {
    return copy_kind == MemcpyKind::HtoD || copy_kind == MemcpyKind::DtoH || copy_kind == MemcpyKind::UvmHtoD ||
           copy_kind == MemcpyKind::UvmDtoH;
  }
  bool to_device() const { return copy_kind == MemcpyKind::HtoD || copy_kind == MemcpyKind::UvmHtoD; }
};

struct ApiInfo {                 // only for api ops whose class needs it (events, syncs)
  LaneId stream = kNone;         // EventRecord, StreamWait, StreamSync (stream lane)
  std::uint32_t device = kNone;  // DeviceSync (device index)
  std::uint64_t event = 0;       // EventRecord, StreamWait, EventSync (trace's event id)
  bool has_event = false;
};

struct Device {
  std::uint32_t id = 0;  // device id as the trace shows it
  std::string name;
  std::uint32_t sm_count = 0;
  double clock_hz = 0;
  double memory_bandwidth = 0;  // bytes/s
  Bytes l2_bytes = 0;
  Bytes memory_bytes = 0;
  std::uint32_t cc_major = 0, cc_minor = 0;
  std::uint32_t async_engines = 0;
  std::uint32_t max_warps_per_sm = 0, max_blocks_per_sm = 0, max_threads_per_block = 0;
  std::uint32_t regs_per_sm = 0;
  Bytes smem_per_sm = 0;
};

struct Process {
  std::uint64_t pid = 0;
  std::string name;
  std::uint32_t rank = kNone;
  std::uint32_t world_size = 0;  // ranks of the job the process belongs to, as its trace says (0: not said)
};

enum class LaneKind : std::uint8_t { Thread = 0, Stream = 1 };

struct Lane {
  LaneKind kind = LaneKind::Thread;
  std::uint32_t process = 0;     // index into processes
  std::uint32_t device = kNone;  // index into devices (streams)
  std::uint64_t native_id = 0;   // tid or stream id as the trace shows it
  std::string name;
  // Execution traces (Chakra): ops of an unordered lane follow only their dependencies, not the
  // lane's op order, up to `capacity` at a time (0: the trace's own, normally 1; kNone: no limit).
  bool fifo = true;
  std::uint32_t capacity = 0;
};

// A module's forward as the PyTorch profiler records it (with_modules or with_stack: a Python frame
// "nn.Module: <class>_<k>"), imported as a range of that name.
inline constexpr const char* kModulePrefix = "nn.Module: ";
inline bool module_range_name(std::string_view n) { return n.substr(0, std::char_traits<char>::length(kModulePrefix)) == kModulePrefix; }

struct Range {  // an NVTX push/pop (or start/end) range on a host thread
  TimeNs start = 0, end = 0;
  StrId name = 0;
  LaneId lane = kNone;  // thread lane
  std::uint16_t depth = 0;
  std::uint32_t parent = kNone;  // index of the enclosing range on the same thread
  bool structure = false;        // an instance of a structure level (sim/analysis/structure.hpp), not the trace's
};

// Which device work a range holds (sim/analysis/analysis.hpp, RangeIndex). Process: what any
// thread of the range's process launches while it is open, except a thread inside a range of its
// own that it opened before this one (that thread works for itself); PyTorch's autograd thread,
// launching while the caller blocks in backward(), is the common case. Thread: only what the
// range's own thread launches (strict per-thread projection).
enum class RangeScope : std::uint8_t { Process = 0, Thread = 1 };

// StartToEnd: the target cannot end before the source started plus the delay plus the target's
// own duration (a collective: no member finishes before the last one arrived and did its part).
enum class DepType : std::uint8_t { EndToStart = 0, StartToStart = 1, EndToEnd = 2, StartToEnd = 3 };
struct ExplicitDep {  // workload files: explicit dependencies
  OpId from = 0, to = 0;
  DepType type = DepType::EndToStart;
  TimeNs delay = 0;
};

// A collective operation matched across ranks: one communication kernel per participating rank.
enum class CollKind : std::uint8_t { Unknown = 0, AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AllToAll, SendRecv };
const char* to_string(CollKind k);
struct Collective {
  CollKind kind = CollKind::Unknown;
  Bytes bytes = 0;               // message size per rank (the input buffer), 0 if unknown
  std::uint32_t group_size = 0;  // ranks in the process group (may exceed the traced ranks)
  std::string group;             // process group name, or "world"
  std::uint32_t seq = 0;         // position in the group's sequence
  std::vector<OpId> members;     // one communication kernel per traced rank, by rank order
  // Ranks taking part: the group's size, or the traced members if more.
  std::uint32_t ranks() const { return std::max<std::uint32_t>(group_size, static_cast<std::uint32_t>(members.size())); }
};

enum class Severity : std::uint8_t { Info = 0, Warning = 1, Error = 2 };
struct Anomaly {
  std::uint64_t count = 0;
  Severity severity = Severity::Info;
  std::string example;  // first occurrence, naming the record
};

struct Trace {
  std::string source;    // file it came from
  std::string format;    // "nsys-sqlite 2025.3.2", "bneck-json", ...
  bool measured = true;  // ops carry measured times (false: hand-written workload)
  StringTable strings;
  std::vector<Device> devices;
  std::vector<Process> processes;
  std::vector<Lane> lanes;
  std::vector<Op> ops;                // sorted by (start, id) after finalize()
  std::vector<LaunchConfig> kernels;  // distinct launch configurations (LaunchInterner)
  std::vector<CopyInfo> copies;
  std::vector<ApiInfo> apis;
  std::vector<Range> ranges;
  std::vector<ExplicitDep> deps;
  std::vector<Collective> collectives;  // after finalize(): match_collectives() (traces/collectives.hpp)
  // Recorded host events that hold no range: the PyTorch profiler's ops without shapes (their
  // thread lane and start). What a profiler cost the host is counted from these and the ranges.
  std::vector<std::pair<LaneId, TimeNs>> unnamed_ops;
  std::map<std::string, Anomaly> anomalies;
  RangeScope range_scope = RangeScope::Process;

  void note(const std::string& key, Severity sev, const std::string& example, std::uint64_t n = 1);
  const std::string& name(const Op& op) const { return strings.str(op.name); }
  const ApiInfo* api(const Op& op) const { return op.kind == OpKind::Api && op.extra != kNone ? &apis[op.extra] : nullptr; }
  // Importers: the ApiInfo of API op `id`, created on first use. The reference is invalidated by
  // the next call that creates one (apis may grow).
  ApiInfo& api_info_for(OpId id) {
    Op& op = ops[id];
    if (op.extra == kNone) {
      op.extra = static_cast<std::uint32_t>(apis.size());
      apis.emplace_back();
    }
    return apis[op.extra];
  }
  const CopyInfo* copy(const Op& op) const {
    return (op.kind == OpKind::Memcpy || op.kind == OpKind::Memset) && op.extra != kNone ? &copies[op.extra] : nullptr;
  }
  std::uint32_t rank_of(const Op& op) const { return rank_of_lane(op.lane); }
  // The rank of a lane's process (the process's index if it has none).
  std::uint32_t rank_of_lane(LaneId l) const {
    std::uint32_t p = l < lanes.size() ? lanes[l].process : 0;
    return p < processes.size() && processes[p].rank != kNone ? processes[p].rank : p;
  }
  const LaunchConfig* launch(const Op& op) const { return op.kind == OpKind::Kernel && op.extra != kNone ? &kernels[op.extra] : nullptr; }
  std::string lane_label(LaneId l) const;
  std::size_t device_op_count() const;
  // Sorts ops by (start, kind, lane) and remaps every op reference; checks invariants.
  void finalize();
  // Throws InputError naming `source` if a reference is out of range.
  void validate() const;
};

// A kernel's name as both nsys and Kineto spell it, for matching across formats: their demanglers
// differ inside template arguments ("(int)4" / "4", "3ul" / "3", "false" / "0", lambda names,
// "<unnamed>" / "(anonymous namespace)"), so this keeps the qualified name up to its template or
// argument list ("at::native::anon::vectorized_layer_norm_kernel"); copies and memsets become
// "memcpy HtoD" / "memset".
std::string canonical_kernel_name(std::string_view name);

// True if a kernel name denotes a communication kernel (NCCL, RCCL, NVSHMEM collectives, DeepEP's
// all-to-all).
bool is_comm_kernel_name(std::string_view name);

}  // namespace bneck
