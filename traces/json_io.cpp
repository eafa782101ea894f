#include "traces/json_io.hpp"

#include <fstream>
#include <nlohmann/json.hpp>

#include "sim/base/error.hpp"
#include "sim/base/json_input.hpp"

namespace bneck {
using nlohmann::json;

namespace {

const char* dep_type_name(DepType t) {
  switch (t) {
    case DepType::EndToStart: return "end_to_start";
    case DepType::StartToStart: return "start_to_start";
    case DepType::EndToEnd: return "end_to_end";
    case DepType::StartToEnd: return "start_to_end";
  }
  return "end_to_start";
}

}  // namespace

void write_trace_json(const Trace& t, std::ostream& out) {
  json j;
  j["format"] = "bneck-trace";
  j["version"] = 1;
  j["source"] = t.source;
  j["source_format"] = t.format;
  j["measured"] = t.measured;
  json devs = json::array();
  for (const auto& d : t.devices)
    devs.push_back({{"id", d.id},
                    {"name", d.name},
                    {"sm_count", d.sm_count},
                    {"clock", format_frequency(d.clock_hz)},
                    {"clock_hz", d.clock_hz},
                    {"memory_bandwidth_bytes_per_s", d.memory_bandwidth},
                    {"l2_bytes", d.l2_bytes},
                    {"memory_bytes", d.memory_bytes},
                    {"compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)},
                    {"async_engines", d.async_engines},
                    {"max_warps_per_sm", d.max_warps_per_sm},
                    {"max_blocks_per_sm", d.max_blocks_per_sm},
                    {"max_threads_per_block", d.max_threads_per_block},
                    {"registers_per_sm", d.regs_per_sm},
                    {"shared_memory_per_sm_bytes", d.smem_per_sm}});
  j["devices"] = devs;
  json procs = json::array();
  for (const auto& p : t.processes) {
    json pj = {{"pid", p.pid}, {"name", p.name}};
    if (p.rank != kNone) pj["rank"] = p.rank;
    procs.push_back(pj);
  }
  j["processes"] = procs;
  json lanes = json::array();
  for (std::size_t i = 0; i < t.lanes.size(); ++i) {
    const Lane& l = t.lanes[i];
    json lj = {{"id", i}, {"kind", l.kind == LaneKind::Thread ? "thread" : "stream"}, {"process", l.process}, {"native_id", l.native_id}};
    if (l.device != kNone) lj["device"] = l.device;
    if (!l.name.empty()) lj["name"] = l.name;
    lanes.push_back(lj);
  }
  j["lanes"] = lanes;
  json ops = json::array();
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    const Op& o = t.ops[i];
    json oj = {{"id", i}, {"kind", to_string(o.kind)}, {"name", t.name(o)}, {"lane", o.lane}, {"start_ns", o.start}, {"end_ns", o.end()}};
    if (o.link != kNone) oj["launched_by"] = o.link;
    if (o.flags & Op::kFlagNccl) oj["communication"] = true;
    if (o.flags & Op::kFlagGraphNode) oj["graph_node"] = true;
    if (o.kind == OpKind::Api) {
      oj["api_class"] = to_string(o.api_class());
      if (const ApiInfo* a = t.api(o)) {
        if (a->stream != kNone) oj["stream_lane"] = a->stream;
        if (a->device != kNone) oj["device"] = a->device;
        if (a->has_event) oj["event"] = a->event;
      }
    } else if (const LaunchConfig* lc = t.launch(o)) {
      oj["grid"] = {lc->grid(0), lc->grid(1), lc->grid(2)};
      oj["block"] = {lc->block[0], lc->block[1], lc->block[2]};
      oj["registers_per_thread"] = lc->registers;
      oj["static_shared_bytes"] = lc->static_smem;
      oj["dynamic_shared_bytes"] = lc->dynamic_smem;
    } else if (const CopyInfo* ci = t.copy(o)) {
      oj["bytes"] = ci->bytes;
      oj["copy_kind"] = to_string(ci->copy_kind);
      oj["src_kind"] = to_string(ci->src);
      oj["dst_kind"] = to_string(ci->dst);
    }
    ops.push_back(std::move(oj));
  }
  j["ops"] = std::move(ops);
  json ranges = json::array();
  for (const auto& r : t.ranges)
    ranges.push_back({{"name", t.strings.str(r.name)}, {"lane", r.lane}, {"start_ns", r.start}, {"end_ns", r.end}});
  j["ranges"] = ranges;
  json deps = json::array();
  for (const auto& d : t.deps) deps.push_back({{"from", d.from}, {"to", d.to}, {"type", dep_type_name(d.type)}, {"delay_ns", d.delay}});
  j["deps"] = deps;
  json an = json::object();
  for (const auto& [k, a] : t.anomalies)
    an[k] = {{"count", a.count},
             {"severity", a.severity == Severity::Error     ? "error"
                          : a.severity == Severity::Warning ? "warning"
                                                            : "info"},
             {"example", a.example}};
  j["anomalies"] = an;
  out << j.dump(1) << '\n';
}

namespace {

class JsonReader {
 public:
  JsonReader(const json& j, std::string source) : j_(j) { t_.source = std::move(source); }

  Trace run() {
    if (!j_.is_object()) fail("top level", "expected a JSON object");
    std::string fmt = j_.value("format", "");
    if (fmt != "bneck-trace" && fmt != "bneck-workload") fail("top level", "\"format\" must be \"bneck-trace\" or \"bneck-workload\"");
    t_.format = fmt == "bneck-trace" ? "bneck-json" : "bneck-workload";
    read_devices();
    read_processes();
    read_lanes();
    read_ops();
    read_ranges();
    read_deps();
    t_.finalize();
    return std::move(t_);
  }

 private:
  [[noreturn]] void fail(const std::string& rec, const std::string& what) const { throw InputError(t_.source, rec + ": " + what); }
  const json& arr(const char* key) {
    static const json empty = json::array();
    if (!j_.contains(key)) return empty;
    if (!j_[key].is_array()) fail(key, "expected an array");
    return j_[key];
  }
  template <typename T>
  T num(const json& o, const char* key, const std::string& rec, T dflt) {
    if (!o.contains(key)) return dflt;
    const json& v = o[key];
    if (!v.is_number()) fail(rec, std::string("\"") + key + "\" must be a number");
    if constexpr (std::is_integral_v<T>) {
      if (!v.is_number_integer()) fail(rec, std::string("\"") + key + "\" must be an integer");
      if constexpr (std::is_unsigned_v<T>) {
        if (v.is_number_integer() && !v.is_number_unsigned() && v.get<std::int64_t>() < 0)
          fail(rec, std::string("\"") + key + "\" must not be negative");
      }
    }
    return v.get<T>();
  }
  // Times are bounded to +-2^62 ns (146 years, as Trace::finalize allows) so that differences of
  // two never overflow.
  TimeNs time_field(const json& o, const char* ns_key, const char* unit_key, const std::string& rec, TimeNs dflt, bool* present = nullptr) {
    if (present) *present = true;
    constexpr TimeNs kLimit = TimeNs{1} << 62;
    auto bounded = [&](TimeNs v, const char* key) {
      if (v > kLimit || v < -kLimit) fail(rec, std::string("\"") + key + "\" out of range: a timestamp more than 2^62 ns from zero");
      return v;
    };
    if (o.contains(ns_key)) return bounded(num<TimeNs>(o, ns_key, rec, 0), ns_key);
    if (o.contains(unit_key)) {
      if (!o[unit_key].is_string()) fail(rec, std::string("\"") + unit_key + "\" must be a string with a unit, e.g. \"2 ms\"");
      try {
        return bounded(parse_duration(o[unit_key].get<std::string>()), unit_key);
      } catch (const InputError& e) { fail(rec, e.what()); }
    }
    if (present) *present = false;
    return dflt;
  }
  std::string str(const json& o, const char* key, const std::string& rec, const std::string& dflt = "") {
    if (!o.contains(key)) return dflt;
    if (!o[key].is_string()) fail(rec, std::string("\"") + key + "\" must be a string");
    return o[key].get<std::string>();
  }

  void read_devices() {
    const json& a = arr("devices");
    for (std::size_t i = 0; i < a.size(); ++i) {
      const json& d = a[i];
      std::string rec = "devices[" + std::to_string(i) + "]";
      if (!d.is_object()) fail(rec, "expected an object");
      Device dv;
      dv.id = num<std::uint32_t>(d, "id", rec, static_cast<std::uint32_t>(i));
      dv.name = str(d, "name", rec);
      dv.sm_count = num<std::uint32_t>(d, "sm_count", rec, 0);
      dv.clock_hz = num<double>(d, "clock_hz", rec, 0);
      dv.memory_bandwidth = num<double>(d, "memory_bandwidth_bytes_per_s", rec, 0);
      dv.l2_bytes = num<Bytes>(d, "l2_bytes", rec, 0);
      dv.memory_bytes = num<Bytes>(d, "memory_bytes", rec, 0);
      std::string cc = str(d, "compute_capability", rec);
      if (auto p = cc.find('.'); p != std::string::npos) {
        try {
          dv.cc_major = static_cast<std::uint32_t>(std::stoul(cc.substr(0, p)));
          dv.cc_minor = static_cast<std::uint32_t>(std::stoul(cc.substr(p + 1)));
        } catch (...) { fail(rec, "malformed compute_capability"); }
      }
      dv.async_engines = num<std::uint32_t>(d, "async_engines", rec, 0);
      dv.max_warps_per_sm = num<std::uint32_t>(d, "max_warps_per_sm", rec, 0);
      dv.max_blocks_per_sm = num<std::uint32_t>(d, "max_blocks_per_sm", rec, 0);
      dv.max_threads_per_block = num<std::uint32_t>(d, "max_threads_per_block", rec, 0);
      dv.regs_per_sm = num<std::uint32_t>(d, "registers_per_sm", rec, 0);
      dv.smem_per_sm = num<Bytes>(d, "shared_memory_per_sm_bytes", rec, 0);
      t_.devices.push_back(dv);
    }
    if (t_.devices.empty()) {
      Device dv;
      dv.name = "device 0";
      t_.devices.push_back(dv);
    }
  }
  void read_processes() {
    const json& a = arr("processes");
    for (std::size_t i = 0; i < a.size(); ++i) {
      std::string rec = "processes[" + std::to_string(i) + "]";
      if (!a[i].is_object()) fail(rec, "expected an object");
      Process p;
      p.pid = num<std::uint64_t>(a[i], "pid", rec, i);
      p.name = str(a[i], "name", rec);
      p.rank = num<std::uint32_t>(a[i], "rank", rec, kNone);
      t_.processes.push_back(p);
    }
    if (t_.processes.empty()) t_.processes.push_back(Process{});
  }
  void read_lanes() {
    const json& a = arr("lanes");
    for (std::size_t i = 0; i < a.size(); ++i) {
      std::string rec = "lanes[" + std::to_string(i) + "]";
      const json& l = a[i];
      if (!l.is_object()) fail(rec, "expected an object");
      if (l.contains("id") && num<std::size_t>(l, "id", rec, 0) != i) fail(rec, "lane ids must be 0, 1, 2, ... in order");
      Lane ln;
      std::string kind = str(l, "kind", rec, "stream");
      if (kind != "thread" && kind != "stream") fail(rec, "\"kind\" must be \"thread\" or \"stream\"");
      ln.kind = kind == "thread" ? LaneKind::Thread : LaneKind::Stream;
      ln.process = num<std::uint32_t>(l, "process", rec, 0);
      if (ln.process >= t_.processes.size()) fail(rec, "\"process\" out of range");
      ln.device = num<std::uint32_t>(l, "device", rec, ln.kind == LaneKind::Stream ? 0u : kNone);
      if (ln.device != kNone && ln.device >= t_.devices.size()) fail(rec, "\"device\" out of range");
      ln.native_id = num<std::uint64_t>(l, "native_id", rec, i);
      ln.name = str(l, "name", rec);
      t_.lanes.push_back(ln);
    }
  }
  void read_ops() {
    const json& a = arr("ops");
    if (a.empty()) fail("ops", "no ops");
    t_.measured = j_.value("measured", j_.value("format", "") == "bneck-trace");
    for (std::size_t i = 0; i < a.size(); ++i) {
      std::string rec = "ops[" + std::to_string(i) + "]";
      const json& o = a[i];
      if (!o.is_object()) fail(rec, "expected an object");
      if (o.contains("id") && num<std::size_t>(o, "id", rec, 0) != i) fail(rec, "op ids must be 0, 1, 2, ... in order");
      Op op;
      auto kind = op_kind_from_string(str(o, "kind", rec, "kernel"));
      if (!kind) fail(rec, "unknown \"kind\" (api, kernel, memcpy, memset)");
      op.kind = *kind;
      op.name = t_.strings.intern(str(o, "name", rec, std::string(to_string(op.kind)) + " " + std::to_string(i)));
      op.lane = num<std::uint32_t>(o, "lane", rec, kNone);
      if (op.lane >= t_.lanes.size()) fail(rec, "\"lane\" missing or out of range");
      bool has_start = false, has_end = false, has_dur = false;
      op.start = time_field(o, "start_ns", "start", rec, 0, &has_start);
      TimeNs end = time_field(o, "end_ns", "end", rec, 0, &has_end);
      TimeNs dur = time_field(o, "duration_ns", "duration", rec, 0, &has_dur);
      if (!has_end && !has_dur) fail(rec, "needs \"end_ns\" or a \"duration\" such as \"2 ms\"");
      if (has_end ? end < op.start : dur < 0) fail(rec, "negative duration");
      if (!op.set_duration(has_end ? end - op.start : dur)) fail(rec, "duration over 35 minutes");
      if (has_start && !t_.measured) op.flags |= Op::kFlagReleased;
      op.link = num<std::uint32_t>(o, "launched_by", rec, kNone);
      if (op.link != kNone && (op.link >= a.size() || op.link == i)) fail(rec, "\"launched_by\" out of range");
      if (o.value("communication", false) || (op.kind == OpKind::Kernel && is_comm_kernel_name(t_.strings.str(op.name))))
        op.flags |= Op::kFlagNccl;
      if (o.value("graph_node", false)) op.flags |= Op::kFlagGraphNode;
      if (op.kind == OpKind::Api) {
        auto cls = api_class_from_string(str(o, "api_class", rec, "other"));
        if (!cls) fail(rec, "unknown \"api_class\"");
        op.set_api_class(*cls);
        if (o.contains("stream_lane") || o.contains("event") || o.contains("device")) {
          ApiInfo info;
          info.stream = num<std::uint32_t>(o, "stream_lane", rec, kNone);
          if (info.stream != kNone && info.stream >= t_.lanes.size()) fail(rec, "\"stream_lane\" out of range");
          info.device = num<std::uint32_t>(o, "device", rec, kNone);
          if (info.device != kNone && info.device >= t_.devices.size()) fail(rec, "\"device\" out of range");
          info.has_event = o.contains("event");
          info.event = num<std::uint64_t>(o, "event", rec, 0);
          op.extra = static_cast<std::uint32_t>(t_.apis.size());
          t_.apis.push_back(info);
        }
      } else if (op.kind == OpKind::Kernel && (o.contains("grid") || o.contains("block"))) {
        LaunchConfig lc;
        for (const char* key : {"grid", "block"}) {
          if (!o.contains(key)) continue;
          const json& g = o[key];
          if (!g.is_array() || g.size() != 3) fail(rec, std::string("\"") + key + "\" must be [x, y, z]");
          for (int k = 0; k < 3; ++k) {
            if (!g[static_cast<std::size_t>(k)].is_number_unsigned())
              fail(rec, std::string("\"") + key + "\" entries must be positive integers");
            auto v = g[static_cast<std::size_t>(k)].get<std::uint64_t>();
            if (key[0] == 'g')
              lc.set_grid(k, v);
            else
              lc.block[k] = static_cast<std::uint16_t>(std::min<std::uint64_t>(v, 0xFFFFu));
          }
        }
        lc.registers = num<std::uint16_t>(o, "registers_per_thread", rec, 0);
        lc.static_smem = num<std::uint32_t>(o, "static_shared_bytes", rec, 0);
        lc.dynamic_smem = num<std::uint32_t>(o, "dynamic_shared_bytes", rec, 0);
        op.extra = launches_.intern(t_.kernels, lc);
      } else if (op.kind == OpKind::Memcpy || op.kind == OpKind::Memset) {
        CopyInfo ci;
        ci.bytes = num<Bytes>(o, "bytes", rec, 0);
        if (o.contains("size")) {
          try {
            ci.bytes = parse_bytes(str(o, "size", rec));
          } catch (const InputError& e) { fail(rec, e.what()); }
        }
        auto ck = memcpy_kind_from_string(str(o, "copy_kind", rec, "unknown"));
        auto sk = mem_kind_from_string(str(o, "src_kind", rec, "unknown"));
        auto dk = mem_kind_from_string(str(o, "dst_kind", rec, "unknown"));
        if (!ck || !sk || !dk) fail(rec, "unknown copy_kind/src_kind/dst_kind");
        ci.copy_kind = *ck;
        ci.src = *sk;
        ci.dst = *dk;
        op.extra = static_cast<std::uint32_t>(t_.copies.size());
        t_.copies.push_back(ci);
      }
      // Workload shorthand: "after": [ids] means end-to-start dependencies.
      if (o.contains("after")) {
        const json& af = o["after"];
        if (!af.is_array()) fail(rec, "\"after\" must be an array of op ids");
        for (const auto& x : af) {
          if (!x.is_number_unsigned() || x.get<std::uint64_t>() >= a.size() || x.get<std::uint64_t>() == i)
            fail(rec, "\"after\" names a missing op");
          t_.deps.push_back({static_cast<OpId>(x.get<std::uint64_t>()), static_cast<OpId>(i), DepType::EndToStart, 0});
        }
      }
      t_.ops.push_back(op);
    }
  }
  void read_ranges() {
    const json& a = arr("ranges");
    for (std::size_t i = 0; i < a.size(); ++i) {
      std::string rec = "ranges[" + std::to_string(i) + "]";
      const json& r = a[i];
      if (!r.is_object()) fail(rec, "expected an object");
      Range rg;
      rg.name = t_.strings.intern(str(r, "name", rec));
      rg.lane = num<std::uint32_t>(r, "lane", rec, kNone);
      if (rg.lane >= t_.lanes.size() || t_.lanes[rg.lane].kind != LaneKind::Thread) fail(rec, "\"lane\" must name a thread lane");
      rg.start = time_field(r, "start_ns", "start", rec, 0);
      rg.end = time_field(r, "end_ns", "end", rec, 0);
      if (rg.end < rg.start) fail(rec, "ends before it starts");
      t_.ranges.push_back(rg);
    }
  }
  void read_deps() {
    const json& a = arr("deps");
    for (std::size_t i = 0; i < a.size(); ++i) {
      std::string rec = "deps[" + std::to_string(i) + "]";
      const json& d = a[i];
      if (!d.is_object()) fail(rec, "expected an object");
      ExplicitDep dep;
      dep.from = num<std::uint32_t>(d, "from", rec, kNone);
      dep.to = num<std::uint32_t>(d, "to", rec, kNone);
      if (dep.from >= t_.ops.size() || dep.to >= t_.ops.size() || dep.from == dep.to) fail(rec, "\"from\"/\"to\" must name two ops");
      std::string ty = str(d, "type", rec, "end_to_start");
      if (ty == "end_to_start")
        dep.type = DepType::EndToStart;
      else if (ty == "start_to_start")
        dep.type = DepType::StartToStart;
      else if (ty == "end_to_end")
        dep.type = DepType::EndToEnd;
      else if (ty == "start_to_end")
        dep.type = DepType::StartToEnd;
      else
        fail(rec, "unknown \"type\"");
      dep.delay = time_field(d, "delay_ns", "delay", rec, 0);
      t_.deps.push_back(dep);
    }
  }

  const json& j_;
  Trace t_;
  LaunchInterner launches_;
};

}  // namespace

Trace read_trace_json(std::istream& in, const std::string& source) {
  json j = parse_json_input(in, source);
  return with_json_errors(source, [&] { return JsonReader(j, source).run(); });
}

int BneckJsonImporter::sniff(const SniffInput& in) const {
  std::string_view head = in.head;
  if (!json_object_start(head)) return 0;
  if (in.keys) {
    auto f = in.key_value("format");
    return f == "bneck-trace" || f == "bneck-workload" ? 95 : 0;
  }
  return head.find("\"bneck-trace\"") != std::string_view::npos || head.find("\"bneck-workload\"") != std::string_view::npos ? 95 : 0;
}

Trace BneckJsonImporter::import(const std::string& path, const ImportOptions&) const {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "cannot open for reading");
  return read_trace_json(in, path);
}

}  // namespace bneck
