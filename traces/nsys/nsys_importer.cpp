#include "traces/nsys/nsys_importer.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <exception>
#include <fstream>
#include <thread>
#include <unordered_map>

#include "sim/base/error.hpp"
#include "traces/cuda_api.hpp"
#include "traces/progress.hpp"
#include "traces/sqlite_scan.hpp"
#include "traces/sqlite_db.hpp"

namespace bneck {

int NsysSqliteImporter::sniff(const SniffInput& in) const {
  static constexpr char kMagic[] = "SQLite format 3";
  std::string_view head = in.head;
  return head.size() >= 16 && head.substr(0, 15) == kMagic && head[15] == '\0' ? 90 : 0;
}

namespace {

constexpr std::uint32_t kU32Sentinel = 4294967295u;

std::uint64_t pid_of_global(std::int64_t g) { return (static_cast<std::uint64_t>(g) >> 24) & 0xFFFFFFu; }
std::uint64_t tid_of_global(std::int64_t g) { return static_cast<std::uint64_t>(g) & 0xFFFFFFu; }

struct StreamKey {
  std::uint64_t pid, device, context, stream;
  bool operator==(const StreamKey&) const = default;
};
struct StreamKeyHash {
  std::size_t operator()(const StreamKey& k) const {
    std::uint64_t h = k.pid * 0x9E3779B97F4A7C15ull ^ (k.device + 0x632BE59BD9B4E019ull);
    h = (h ^ (h >> 29)) * 0xBF58476D1CE4E5B9ull ^ k.context * 31 ^ k.stream * 0x94D049BB133111EBull;
    return static_cast<std::size_t>(h ^ (h >> 31));
  }
};

// Builds a comma list of "col" or "NULL" for each wanted column, so that missing non-core columns
// read as NULL.
std::string cols(const std::set<std::string>& have, std::initializer_list<const char*> want) {
  std::string out;
  for (const char* c : want) {
    if (!out.empty()) out += ",";
    out += have.count(c) ? c : "NULL";
  }
  return out;
}

// The rows of `table`'s columns `want` (a column the table lacks reads as NULL), through the file
// format (SqliteScan) when `scan`, else through SQLite; `each` takes the statement (step, null,
// i64, rows). A file the scan does not cover throws SqliteScan::Unsupported.
template <class Each>
void read_rows(const SqliteDb& db, bool scan, const std::string& table, std::initializer_list<const char*> want, Each&& each) {
  if (scan) {
    SqliteScan st(db, table, std::vector<std::string>(want.begin(), want.end()));
    each(st);
  } else {
    SqliteStmt st(db, "SELECT " + cols(db.columns(table), want) + " FROM " + table);
    each(st);
  }
}

class Reader {
 public:
  Reader(const std::string& path, const ImportOptions& opt, bool scan)
      : db_(path), progress_("importing " + path, opt.progress), scan_(scan) {
    t_.source = path;
  }

  Trace run() {
    read_meta();
    read_strings();
    read_devices();
    read_processes();
    const std::size_t kernel_rows = reserve();
    {
      // The kernel table on a second thread (its own connection) while this one reads the API calls.
      KernelRows kernels;
      std::exception_ptr failed;
      std::thread reader;
      if (db_.has_table(kKernelTable)) {
        progress_.phase("reading CUDA API calls and kernels");
        // Sized once from the table's rows: no reallocation copies (2 GB at 100 M kernels) while
        // the API calls fill the trace beside it.
        kernels.ops.reserve(kernel_rows);
        kernels.names.reserve(kernel_rows);
        kernels.corr.reserve(kernel_rows);
        reader = std::thread([&] {
          try {
            read_kernel_rows(t_.source, scan_, kernels);
          } catch (...) { failed = std::current_exception(); }
        });
      }
      struct Join {
        std::thread& t;
        ~Join() {
          if (t.joinable()) t.join();
        }
      } join{reader};
      read_runtime();
      if (reader.joinable()) reader.join();
      if (failed) std::rethrow_exception(failed);
      add_kernels(kernels);
    }
    read_copies(false);
    read_copies(true);
    if (t_.ops.empty() && !db_.has_table("CUPTI_ACTIVITY_KIND_KERNEL") && !db_.has_table("CUPTI_ACTIVITY_KIND_MEMCPY") &&
        !db_.has_table("CUPTI_ACTIVITY_KIND_RUNTIME"))
      db_.fail(
          "no CUDA activity tables (CUPTI_ACTIVITY_KIND_KERNEL/MEMCPY/RUNTIME): not an nsys CUDA trace, "
          "or it was captured without -t cuda");
    progress_.phase("joining device ops to their launches");
    link_launches();
    read_sync();
    read_events();
    read_nvtx();
    if (const std::size_t osrt = row_estimate("OSRT_API"))
      t_.note(kNsysOsrtNote, Severity::Info, "OSRT_API holds about " + std::to_string(osrt) + " calls");
    fix_blocking_copies();
    api_by_corr_.clear();
    api_by_corr_.shrink_to_fit();
    progress_.phase("sorting");
    t_.finalize();
    return std::move(t_);
  }

 private:
  void read_meta() {
    std::string table = db_.has_table("META_DATA_EXPORT")   ? "META_DATA_EXPORT"
                        : db_.has_table("EXPORT_META_DATA") ? "EXPORT_META_DATA"
                                                            : "";
    std::string version = "unknown";
    if (!table.empty()) {
      auto c = db_.columns(table);
      if (c.count("name") && c.count("value")) {
        SqliteStmt st(db_, "SELECT name, value FROM " + table);
        while (st.step())
          if (st.text(0) == "EXPORT_PRODUCT_VERSION") version = std::string(st.text(1));
      }
    } else {
      t_.note("nsys: no export metadata table", Severity::Info, "neither META_DATA_EXPORT nor EXPORT_META_DATA");
    }
    t_.format = "nsys-sqlite " + version;
  }

  void read_strings() {
    if (!db_.has_table("StringIds")) {
      t_.note("nsys: no StringIds table", Severity::Warning, "names will be numeric");
      return;
    }
    // Ids are dense in real exports; a file whose ids are not (a hostile one: id 2^31 in a 12 kB
    // file) is indexed through a map instead of a vector sized by its largest id.
    std::vector<std::pair<std::int64_t, std::string>> rows;
    std::int64_t max_id = -1;
    SqliteStmt st(db_, "SELECT id, value FROM StringIds");
    while (st.step()) {
      std::int64_t id = st.i64(0);
      if (id < 0 || id > (1ll << 31)) {
        t_.note("nsys: StringIds id out of range", Severity::Warning, "id " + std::to_string(id));
        continue;
      }
      max_id = std::max(max_id, id);
      rows.emplace_back(id, std::string(st.text(1)));
    }
    if (max_id >= 0 && static_cast<std::size_t>(max_id) > 8 * rows.size() + 65536) {
      for (auto& [id, text] : rows) {
        sparse_ids_.emplace(id, static_cast<std::uint32_t>(raw_strings_.size()));
        raw_strings_.push_back(std::move(text));
      }
    } else {
      raw_strings_.resize(static_cast<std::size_t>(max_id + 1));
      for (auto& [id, text] : rows) raw_strings_[static_cast<std::size_t>(id)] = std::move(text);
    }
    interned_.assign(raw_strings_.size(), kNone);
  }

  StrId string_id(std::int64_t nsys_id) {
    if (!sparse_ids_.empty()) {
      auto it = sparse_ids_.find(nsys_id);
      nsys_id = it == sparse_ids_.end() ? -1 : static_cast<std::int64_t>(it->second);
    }
    if (nsys_id < 0 || static_cast<std::size_t>(nsys_id) >= raw_strings_.size()) {
      t_.note("nsys: dangling string id", Severity::Warning, "string id " + std::to_string(nsys_id));
      return t_.strings.intern("<string " + std::to_string(nsys_id) + ">");
    }
    auto& slot = interned_[static_cast<std::size_t>(nsys_id)];
    if (slot == kNone) slot = t_.strings.intern(raw_strings_[static_cast<std::size_t>(nsys_id)]);
    return slot;
  }
  const std::string& raw_string(std::int64_t nsys_id) {
    static const std::string empty;
    if (nsys_id < 0 || static_cast<std::size_t>(nsys_id) >= raw_strings_.size()) return empty;
    return raw_strings_[static_cast<std::size_t>(nsys_id)];
  }

  void read_devices() {
    std::string table = db_.has_table("TARGET_INFO_GPU")        ? "TARGET_INFO_GPU"
                        : db_.has_table("TARGET_INFO_CUDA_GPU") ? "TARGET_INFO_CUDA_GPU"
                                                                : "";
    if (table.empty()) return;
    auto c = db_.columns(table);
    bool old = table == "TARGET_INFO_CUDA_GPU";
    std::string sql = "SELECT " +
                      cols(c, {old ? "deviceId" : "id", "name", old ? "numMultiprocessors" : "smCount", old ? "coreClockRate" : "clockRate",
                               "memoryBandwidth", "l2CacheSize", "totalMemory", old ? "computeCapabilityMajor" : "computeMajor",
                               old ? "computeCapabilityMinor" : "computeMinor", "asyncEngines", "maxWarpsPerSm", "maxBlocksPerSm",
                               "maxThreadsPerBlock", "maxRegistersPerSm", "maxShmemPerSm"}) +
                      " FROM " + table;
    SqliteStmt st(db_, sql);
    while (st.step()) {
      Device d;
      d.id = static_cast<std::uint32_t>(st.i64(0));
      d.name = std::string(st.text(1));
      d.sm_count = static_cast<std::uint32_t>(st.i64(2));
      d.clock_hz = static_cast<double>(st.i64(3));
      d.memory_bandwidth = static_cast<double>(st.i64(4));
      d.l2_bytes = static_cast<Bytes>(st.i64(5));
      d.memory_bytes = static_cast<Bytes>(st.i64(6));
      d.cc_major = static_cast<std::uint32_t>(st.i64(7));
      d.cc_minor = static_cast<std::uint32_t>(st.i64(8));
      d.async_engines = static_cast<std::uint32_t>(st.i64(9));
      d.max_warps_per_sm = static_cast<std::uint32_t>(st.i64(10));
      d.max_blocks_per_sm = static_cast<std::uint32_t>(st.i64(11));
      d.max_threads_per_block = static_cast<std::uint32_t>(st.i64(12));
      d.regs_per_sm = static_cast<std::uint32_t>(st.i64(13));
      d.smem_per_sm = static_cast<Bytes>(st.i64(14));
      if (!known_devices_.count(d.id)) known_devices_.emplace(d.id, d);
    }
  }

  std::uint32_t device_index(std::uint64_t dev_id) {
    auto it = device_index_.find(dev_id);
    if (it != device_index_.end()) return it->second;
    Device d;
    auto k = known_devices_.find(static_cast<std::uint32_t>(dev_id));
    if (k != known_devices_.end())
      d = k->second;
    else {
      d.id = static_cast<std::uint32_t>(dev_id);
      d.name = "GPU " + std::to_string(dev_id);
      t_.note("nsys: device without TARGET_INFO_GPU row", Severity::Warning, "deviceId " + std::to_string(dev_id));
    }
    t_.devices.push_back(d);
    auto idx = static_cast<std::uint32_t>(t_.devices.size() - 1);
    device_index_.emplace(dev_id, idx);
    return idx;
  }

  void read_processes() {
    if (!db_.has_table("PROCESSES")) return;
    auto c = db_.columns("PROCESSES");
    SqliteStmt st(db_, "SELECT " + cols(c, {"globalPid", "pid", "name"}) + " FROM PROCESSES");
    while (st.step()) process_names_[pid_of_global(st.i64(0))] = std::string(st.text(2));
  }

  std::uint32_t process_index(std::uint64_t pid) {
    auto it = process_index_.find(pid);
    if (it != process_index_.end()) return it->second;
    Process p;
    p.pid = pid;
    auto n = process_names_.find(pid);
    if (n != process_names_.end()) p.name = n->second;
    t_.processes.push_back(p);
    auto idx = static_cast<std::uint32_t>(t_.processes.size() - 1);
    process_index_.emplace(pid, idx);
    return idx;
  }

  LaneId thread_lane(std::int64_t global_tid) {
    auto key = static_cast<std::uint64_t>(global_tid);
    auto it = thread_lane_.find(key);
    if (it != thread_lane_.end()) return it->second;
    Lane l;
    l.kind = LaneKind::Thread;
    l.process = process_index(pid_of_global(global_tid));
    l.native_id = tid_of_global(global_tid);
    t_.lanes.push_back(l);
    auto id = static_cast<LaneId>(t_.lanes.size() - 1);
    thread_lane_.emplace(key, id);
    return id;
  }

  LaneId stream_lane(std::uint64_t pid, std::uint64_t dev, std::uint64_t ctx, std::uint64_t stream) {
    StreamKey k{pid, dev, ctx, stream};
    auto it = stream_lane_.find(k);
    if (it != stream_lane_.end()) return it->second;
    Lane l;
    l.kind = LaneKind::Stream;
    l.process = process_index(pid);
    l.device = device_index(dev);
    l.native_id = stream;
    t_.lanes.push_back(l);
    auto id = static_cast<LaneId>(t_.lanes.size() - 1);
    stream_lane_.emplace(k, id);
    return id;
  }

  static std::uint64_t corr_key(std::uint64_t pid, std::int64_t corr) {
    return (pid << 32) | (static_cast<std::uint64_t>(corr) & 0xFFFFFFFFull);
  }

  // Rows in a table (its largest rowid: nsys never deletes), to reserve memory once; never more
  // than the file could hold (a row takes more than 16 bytes), whatever a rowid says.
  std::size_t row_estimate(const std::string& table) {
    if (!db_.has_table(table)) return 0;
    SqliteStmt st(db_, "SELECT MAX(rowid) FROM " + table);
    std::size_t rows = st.step() && !st.null(0) ? static_cast<std::size_t>(std::max<std::int64_t>(0, st.i64(0))) : 0;
    std::error_code ec;
    auto bytes = std::filesystem::file_size(t_.source, ec);
    return ec ? std::min<std::size_t>(rows, 1u << 20) : std::min<std::size_t>(rows, bytes / 16);
  }

  // Returns the kernel table's rows (for the thread that reads them).
  std::size_t reserve() {
    std::size_t api = row_estimate("CUPTI_ACTIVITY_KIND_RUNTIME"), k = row_estimate(kKernelTable);
    std::size_t c = row_estimate("CUPTI_ACTIVITY_KIND_MEMCPY") + row_estimate("CUPTI_ACTIVITY_KIND_MEMSET");
    t_.ops.reserve(api + k + c);
    t_.copies.reserve(c);
    api_by_corr_.reserve(api);
    pending_corr_.reserve(k + c);
    return k;
  }

  void read_runtime() {
    if (!db_.has_table("CUPTI_ACTIVITY_KIND_RUNTIME")) {
      t_.note("nsys: no CUDA API table", Severity::Warning, "CUPTI_ACTIVITY_KIND_RUNTIME missing: device ops replay without host launches");
      return;
    }
    progress_.phase("reading CUDA API calls");
    std::unordered_map<std::int64_t, std::pair<StrId, ApiClass>> name_cache;
    read_rows(db_, scan_, "CUPTI_ACTIVITY_KIND_RUNTIME", {"start", "end", "globalTid", "correlationId", "nameId"},
              [&](auto& st) { runtime_rows(st, name_cache); });
    std::sort(api_by_corr_.begin(), api_by_corr_.end());
    for (std::size_t i = 1; i < api_by_corr_.size(); ++i)
      if (api_by_corr_[i].first == api_by_corr_[i - 1].first)
        t_.note("nsys: duplicate correlation id among API calls", Severity::Warning,
                "correlationId " + std::to_string(api_by_corr_[i].first & 0xFFFFFFFFull));
  }

  template <class Rows>
  void runtime_rows(Rows& st, std::unordered_map<std::int64_t, std::pair<StrId, ApiClass>>& name_cache) {
    while (st.step()) {
      if (st.null(0) || st.null(2)) {
        t_.note("nsys: API call without start or thread", Severity::Warning,
                "CUPTI_ACTIVITY_KIND_RUNTIME record " + std::to_string(st.rows()));
        continue;
      }
      Op op;
      op.kind = OpKind::Api;
      op.start = st.i64(0);
      TimeNs end = st.null(1) ? op.start : st.i64(1);
      if (!op.set_end(end)) {
        t_.note("nsys: API call ends before it starts or lasts over 35 minutes", Severity::Warning,
                "CUPTI_ACTIVITY_KIND_RUNTIME record " + std::to_string(st.rows()));
      }
      std::int64_t gtid = st.i64(2);
      op.lane = thread_lane(gtid);
      std::int64_t nid = st.null(4) ? -1 : st.i64(4);
      auto it = name_cache.find(nid);
      if (it == name_cache.end()) {
        std::string_view raw = raw_string(nid);
        std::string_view base = strip_api_suffix(raw);
        StrId sid = t_.strings.intern(base.empty() ? std::string_view("<unnamed API call>") : base);
        it = name_cache.emplace(nid, std::make_pair(sid, classify_cuda_api(base))).first;
      }
      op.name = it->second.first;
      op.set_api_class(it->second.second);
      auto id = static_cast<OpId>(t_.ops.size());
      if (!st.null(3)) api_by_corr_.emplace_back(corr_key(pid_of_global(gtid), st.i64(3)), id);
      t_.ops.push_back(op);
    }
  }

  // `hint` (optional): where the previous lookup ended; lookups of rising keys (device ops in the
  // order they were launched) then gallop forward from it instead of searching the whole table.
  OpId find_api(std::uint64_t key, std::size_t* hint = nullptr) const {
    const auto probe = std::make_pair(key, OpId{0});
    auto first = api_by_corr_.begin(), last = api_by_corr_.end();
    if (hint && *hint < api_by_corr_.size() && api_by_corr_[*hint] < probe) {
      std::size_t lo = *hint, step = 1;  // api_by_corr_[lo] < probe
      while (lo + step < api_by_corr_.size() && api_by_corr_[lo + step] < probe) {
        lo += step;
        step *= 2;
      }
      first = api_by_corr_.begin() + static_cast<std::ptrdiff_t>(lo + 1);
      last = api_by_corr_.begin() + static_cast<std::ptrdiff_t>(std::min(lo + step + 1, api_by_corr_.size()));
    }
    auto it = std::lower_bound(first, last, probe);
    if (hint) *hint = static_cast<std::size_t>(it - api_by_corr_.begin());
    return it != api_by_corr_.end() && it->first == key ? it->second : kNone;
  }

  // Process id of a device op: its globalPid column when present.
  std::uint64_t device_op_pid(const SqliteStmt& st, int col) {
    if (!st.null(col)) return pid_of_global(st.i64(col));
    t_.note("nsys: device op without globalPid", Severity::Info, "assuming the first process");
    return first_pid();
  }
  std::uint64_t first_pid() const { return t_.processes.empty() ? 0 : t_.processes.front().pid; }

  // The kernel table read on its own connection, beside the API calls (read_runtime) on this one:
  // the two largest tables of an export, each read by one core. Rows become ops with local ids
  // (lane: an index into `keys`, name: in `names`, extra: into `launches`) that add_kernels maps to
  // the trace's once both reads are done, so the trace is touched by one thread only.
  struct KernelRows {
    std::vector<Op> ops;
    std::vector<std::int64_t> names;  // nsys string id of each op's name
    std::vector<std::int64_t> corr;   // correlation id of each op, kNoCorr where null
    std::vector<StreamKey> keys;      // in order of first use; pid kNoPid where the row had no globalPid
    std::vector<LaunchConfig> launches;
    std::vector<std::pair<std::string, std::string>> warnings;  // (title, example), in row order
    std::uint64_t no_pid = 0;                                   // rows without globalPid
  };
  static constexpr std::int64_t kNoCorr = INT64_MIN;
  static constexpr std::uint64_t kNoPid = ~0ull;
  static constexpr const char* kKernelTable = "CUPTI_ACTIVITY_KIND_KERNEL";

  static void read_kernel_rows(const std::string& path, bool scan, KernelRows& out) {
    SqliteDb db(path);
    read_rows(
        db, scan, kKernelTable,
        {"start", "end", "deviceId", "contextId", "streamId", "correlationId", "globalPid", "demangledName", "shortName", "gridX", "gridY",
         "gridZ", "blockX", "blockY", "blockZ", "registersPerThread", "staticSharedMemory", "dynamicSharedMemory", "graphNodeId"},
        [&](auto& st) { kernel_rows(st, out); });
  }

  template <class Rows>
  static void kernel_rows(Rows& st, KernelRows& out) {
    const std::string table = kKernelTable;
    std::unordered_map<StreamKey, std::uint32_t, StreamKeyHash> key_index;
    LaunchInterner launches;
    while (st.step()) {
      if (st.null(0) || st.null(1)) {
        out.warnings.emplace_back("nsys: kernel without start/end", table + " record " + std::to_string(st.rows()));
        continue;
      }
      Op op;
      op.kind = OpKind::Kernel;
      op.start = st.i64(0);
      if (!op.set_end(st.i64(1)))
        out.warnings.emplace_back("nsys: kernel ends before it starts or lasts over 35 minutes",
                                  table + " record " + std::to_string(st.rows()));
      std::uint64_t pid = kNoPid;
      if (!st.null(6))
        pid = pid_of_global(st.i64(6));
      else
        ++out.no_pid;
      const StreamKey k{pid, static_cast<std::uint64_t>(st.i64(2)), static_cast<std::uint64_t>(st.i64(3)),
                        static_cast<std::uint64_t>(st.i64(4))};
      auto [it, fresh] = key_index.try_emplace(k, static_cast<std::uint32_t>(out.keys.size()));
      if (fresh) out.keys.push_back(k);
      op.lane = it->second;
      out.names.push_back(!st.null(7) ? st.i64(7) : st.i64(8));
      if (!st.null(18) && st.i64(18) != 0) op.flags |= Op::kFlagGraphNode;
      LaunchConfig lc;
      for (int i = 0; i < 3; ++i) {
        lc.set_grid(i, static_cast<std::uint64_t>(std::max<std::int64_t>(1, st.i64(9 + i))));
        lc.block[i] = static_cast<std::uint16_t>(std::clamp<std::int64_t>(st.i64(12 + i), 1, 65535));
      }
      lc.registers = static_cast<std::uint16_t>(std::clamp<std::int64_t>(st.i64(15), 0, 65535));
      lc.static_smem = static_cast<std::uint32_t>(std::max<std::int64_t>(0, st.i64(16)));
      lc.dynamic_smem = static_cast<std::uint32_t>(std::max<std::int64_t>(0, st.i64(17)));
      op.extra = launches.intern(out.launches, lc);
      out.corr.push_back(st.null(5) ? kNoCorr : st.i64(5));
      out.ops.push_back(op);
    }
  }

  void add_kernels(KernelRows& in) {
    for (const auto& [title, example] : in.warnings) t_.note(title, Severity::Warning, example);
    if (in.no_pid) t_.note("nsys: device op without globalPid", Severity::Info, "assuming the first process", in.no_pid);
    // Lanes in order of first use, as a sequential read would have made them.
    std::vector<LaneId> lane(in.keys.size());
    std::vector<std::uint64_t> pid(in.keys.size());
    for (std::size_t i = 0; i < in.keys.size(); ++i) {
      const StreamKey& k = in.keys[i];
      pid[i] = k.pid != kNoPid ? k.pid : first_pid();
      lane[i] = stream_lane(pid[i], k.device, k.context, k.stream);
    }
    std::vector<std::uint32_t> launch(in.launches.size());
    for (std::size_t i = 0; i < in.launches.size(); ++i) launch[i] = launches_.intern(t_.kernels, in.launches[i]);
    for (std::size_t i = 0; i < in.ops.size(); ++i) {
      Op op = in.ops[i];
      const std::uint32_t key = op.lane;
      op.lane = lane[key];
      op.name = string_id(in.names[i]);
      if (op.name >= comm_name_.size()) comm_name_.resize(op.name + 1, -1);
      if (comm_name_[op.name] < 0) comm_name_[op.name] = is_comm_kernel_name(t_.strings.str(op.name)) ? 1 : 0;
      if (comm_name_[op.name]) op.flags |= Op::kFlagNccl;
      op.extra = launch[op.extra];
      pending_corr_.emplace_back(static_cast<OpId>(t_.ops.size()), in.corr[i] == kNoCorr ? ~0ull : corr_key(pid[key], in.corr[i]));
      t_.ops.push_back(op);
    }
    in = KernelRows{};
  }

  static MemcpyKind to_copy_kind(std::int64_t v) { return v >= 0 && v <= 13 ? static_cast<MemcpyKind>(v) : MemcpyKind::Unknown; }
  static MemKind to_mem_kind(std::int64_t v) { return v >= 0 && v <= 7 ? static_cast<MemKind>(v) : MemKind::Unknown; }

  void read_copies(bool memset) {
    const std::string table = memset ? "CUPTI_ACTIVITY_KIND_MEMSET" : "CUPTI_ACTIVITY_KIND_MEMCPY";
    if (!db_.has_table(table)) return;
    progress_.phase(memset ? "reading memsets" : "reading memcpys");
    auto c = db_.columns(table);
    std::string sql = "SELECT " + cols(c, {"start", "end", "deviceId", "contextId", "streamId", "correlationId", "globalPid", "bytes"}) +
                      "," + (memset ? cols(c, {"memKind", "memKind", "memKind"}) : cols(c, {"copyKind", "srcKind", "dstKind"})) + " FROM " +
                      table;
    SqliteStmt st(db_, sql);
    StrId name_id = t_.strings.intern(memset ? "memset" : "memcpy");
    std::unordered_map<int, StrId> names;
    while (st.step()) {
      if (st.null(0) || st.null(1)) {
        t_.note("nsys: copy without start/end", Severity::Warning, table + " record " + std::to_string(st.rows()));
        continue;
      }
      Op op;
      op.kind = memset ? OpKind::Memset : OpKind::Memcpy;
      op.start = st.i64(0);
      if (!op.set_end(st.i64(1)))
        t_.note("nsys: copy ends before it starts or lasts over 35 minutes", Severity::Warning,
                table + " record " + std::to_string(st.rows()));
      std::uint64_t pid = device_op_pid(st, 6);
      op.lane = stream_lane(pid, static_cast<std::uint64_t>(st.i64(2)), static_cast<std::uint64_t>(st.i64(3)),
                            static_cast<std::uint64_t>(st.i64(4)));
      CopyInfo ci;
      ci.bytes = static_cast<Bytes>(std::max<std::int64_t>(0, st.i64(7)));
      if (memset) {
        ci.dst = st.null(8) ? MemKind::Device : to_mem_kind(st.i64(8));
        op.name = name_id;
      } else {
        ci.copy_kind = st.null(8) ? MemcpyKind::Unknown : to_copy_kind(st.i64(8));
        ci.src = st.null(9) ? MemKind::Unknown : to_mem_kind(st.i64(9));
        ci.dst = st.null(10) ? MemKind::Unknown : to_mem_kind(st.i64(10));
        int key = static_cast<int>(ci.copy_kind);
        auto it = names.find(key);
        if (it == names.end()) it = names.emplace(key, t_.strings.intern(std::string("memcpy ") + to_string(ci.copy_kind))).first;
        op.name = it->second;
      }
      op.extra = static_cast<std::uint32_t>(t_.copies.size());
      t_.copies.push_back(ci);
      pending_corr_.emplace_back(static_cast<OpId>(t_.ops.size()), st.null(5) ? ~0ull : corr_key(pid, st.i64(5)));
      t_.ops.push_back(op);
    }
  }

  void link_launches() {
    std::uint64_t unlinked = 0;
    std::size_t hint = 0;
    for (auto [op_id, key] : pending_corr_) {
      OpId api = key == ~0ull ? kNone : find_api(key, &hint);
      if (api == kNone) {
        if (unlinked++ == 0)
          t_.note("nsys: device op without a launching API call", Severity::Info,
                  "op " + t_.strings.str(t_.ops[op_id].name) + " at " + std::to_string(t_.ops[op_id].start) + " ns");
        else
          t_.anomalies["nsys: device op without a launching API call"].count++;
        continue;
      }
      t_.ops[op_id].link = api;
      // A kernel launched by a graph launch call executes as a graph node.
      if (t_.ops[api].api_class() == ApiClass::GraphLaunch) t_.ops[op_id].flags |= Op::kFlagGraphNode;
    }
    pending_corr_.clear();
    pending_corr_.shrink_to_fit();
  }

  void read_sync() {
    const std::string table = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION";
    if (!db_.has_table(table)) return;
    auto c = db_.columns(table);
    SqliteStmt st(db_, "SELECT " + cols(c, {"correlationId", "globalPid", "deviceId", "contextId", "streamId", "eventId", "syncType"}) +
                           " FROM " + table);
    while (st.step()) {
      if (st.null(0) || st.null(1)) continue;
      std::uint64_t pid = pid_of_global(st.i64(1));
      OpId api = find_api(corr_key(pid, st.i64(0)));
      if (api == kNone) {
        t_.note("nsys: synchronization without its API call", Severity::Info, table + " record " + std::to_string(st.rows()));
        continue;
      }
      ApiInfo& info = t_.api_info_for(api);
      auto stream = static_cast<std::uint64_t>(st.i64(4));
      auto dev = static_cast<std::uint64_t>(st.i64(2));
      if (!st.null(4) && stream != kU32Sentinel) info.stream = stream_lane(pid, dev, static_cast<std::uint64_t>(st.i64(3)), stream);
      if (!st.null(5) && static_cast<std::uint64_t>(st.i64(5)) != kU32Sentinel) {
        info.event = static_cast<std::uint64_t>(st.i64(5));
        info.has_event = true;
      }
      if (!st.null(2)) info.device = device_index(dev);
      // The API name decides the class; the record only refines it. An unknown API that CUPTI
      // reports as a context synchronization is one.
      if (t_.ops[api].api_class() == ApiClass::Other && !st.null(6) && st.i64(6) == 4) t_.ops[api].set_api_class(ApiClass::DeviceSync);
    }
  }

  void read_events() {
    const std::string table = "CUPTI_ACTIVITY_KIND_CUDA_EVENT";
    if (!db_.has_table(table)) return;
    auto c = db_.columns(table);
    SqliteStmt st(db_,
                  "SELECT " + cols(c, {"correlationId", "globalPid", "deviceId", "contextId", "streamId", "eventId"}) + " FROM " + table);
    while (st.step()) {
      if (st.null(0) || st.null(1)) continue;
      std::uint64_t pid = pid_of_global(st.i64(1));
      OpId api = find_api(corr_key(pid, st.i64(0)));
      if (api == kNone) {
        t_.note("nsys: event record without its API call", Severity::Info, table + " record " + std::to_string(st.rows()));
        continue;
      }
      ApiInfo& info = t_.api_info_for(api);
      info.stream = stream_lane(pid, static_cast<std::uint64_t>(st.i64(2)), static_cast<std::uint64_t>(st.i64(3)),
                                static_cast<std::uint64_t>(st.i64(4)));
      info.event = static_cast<std::uint64_t>(st.i64(5));
      info.has_event = true;
      info.device = device_index(static_cast<std::uint64_t>(st.i64(2)));
      if (t_.ops[api].api_class() == ApiClass::Other) t_.ops[api].set_api_class(ApiClass::EventRecord);
    }
  }

  void read_nvtx() {
    const std::string table = "NVTX_EVENTS";
    if (!db_.has_table(table)) return;
    auto c = db_.columns(table);
    SqliteStmt st(db_, "SELECT " + cols(c, {"start", "end", "eventType", "text", "textId", "globalTid"}) + " FROM " + table +
                           " WHERE eventType IN (59, 60)");
    while (st.step()) {
      if (st.null(0) || st.null(5)) continue;
      if (st.null(1)) {
        t_.note("nsys: NVTX range never closed", Severity::Info, table + " record " + std::to_string(st.rows()));
        continue;
      }
      Range r;
      r.start = st.i64(0);
      r.end = std::max(r.start, st.i64(1));
      if (!st.null(3))
        r.name = t_.strings.intern(st.text(3));
      else if (!st.null(4))
        r.name = string_id(st.i64(4));
      else
        r.name = t_.strings.intern("<unnamed range>");
      r.lane = thread_lane(st.i64(5));
      t_.ranges.push_back(r);
    }
  }

  // A cudaMemcpyAsync touching pageable host memory returns only when the copy is done.
  void fix_blocking_copies() {
    for (const Op& op : t_.ops) {
      if (op.kind != OpKind::Memcpy || op.link == kNone) continue;
      Op& api = t_.ops[op.link];
      const CopyInfo* ci = t_.copy(op);
      bool pageable = ci && ci->pageable();
      if (api.api_class() == ApiClass::MemcpyAsync && pageable) api.set_api_class(ApiClass::MemcpySync);
    }
  }

  SqliteDb db_;
  Progress progress_;
  bool scan_;  // the large tables read by SqliteScan
  Trace t_;
  LaunchInterner launches_;
  std::vector<std::string> raw_strings_;
  std::unordered_map<std::int64_t, std::uint32_t> sparse_ids_;  // nsys id -> raw_strings_ index, when ids are sparse
  std::vector<StrId> interned_;
  std::vector<std::int8_t> comm_name_;  // per StrId: -1 unknown, 0/1 communication kernel
  std::unordered_map<std::uint32_t, Device> known_devices_;
  std::unordered_map<std::uint64_t, std::uint32_t> device_index_;
  std::unordered_map<std::uint64_t, std::string> process_names_;
  std::unordered_map<std::uint64_t, std::uint32_t> process_index_;
  std::unordered_map<std::uint64_t, LaneId> thread_lane_;
  std::unordered_map<StreamKey, LaneId, StreamKeyHash> stream_lane_;
  std::vector<std::pair<std::uint64_t, OpId>> api_by_corr_;
  std::vector<std::pair<OpId, std::uint64_t>> pending_corr_;
};

}  // namespace

namespace {

// A truncated export still opens, and may even answer queries from its first pages: compare the
// size the header promises with the file's.
void check_not_truncated(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char h[100] = {};
  in.read(reinterpret_cast<char*>(h), sizeof h);
  if (in.gcount() < static_cast<std::streamsize>(sizeof h)) throw InputError(path, "truncated SQLite file (incomplete header)");
  auto be32 = [&](int o) {
    return (std::uint32_t{h[o]} << 24) | (std::uint32_t{h[o + 1]} << 16) | (std::uint32_t{h[o + 2]} << 8) | h[o + 3];
  };
  std::uint64_t page = (std::uint32_t{h[16]} << 8) | h[17];
  if (page == 1) page = 65536;
  std::uint64_t pages = be32(28);
  bool valid = pages != 0 && be32(24) == be32(92);
  in.seekg(0, std::ios::end);
  auto size = static_cast<std::uint64_t>(in.tellg());
  if (valid && page * pages > size)
    throw InputError(path, "truncated SQLite file: its header promises " + std::to_string(page * pages) + " bytes, the file has " +
                               std::to_string(size));
}

}  // namespace

Trace NsysSqliteImporter::import(const std::string& path, const ImportOptions& opt) const {
  check_not_truncated(path);
  if (opt.sqlite_scan) {
    try {
      return Reader(path, opt, true).run();
    } catch (const SqliteScan::Unsupported&) {
      // A file the format reader does not cover: SQLite reads it (or names what is wrong).
    }
  }
  return Reader(path, opt, false).run();
}

}  // namespace bneck
