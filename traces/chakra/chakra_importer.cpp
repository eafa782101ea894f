#include "traces/chakra/chakra_importer.hpp"

#include <zlib.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "sim/base/error.hpp"
#include "traces/gzbuf.hpp"
#include "sim/base/json_input.hpp"

namespace bneck {

namespace {

using nlohmann::json;

struct Node {
  std::uint64_t id = 0;
  std::string name;
  int type = 4;  // Chakra NodeType (4 COMP, 5 SEND, 6 RECV, 7 COMM_COLL)
  bool cpu = false;
  TimeNs duration = 0;
  std::vector<std::uint64_t> deps;  // data dependencies
  std::vector<std::uint64_t> ctrl;  // control dependencies
};

std::string read_all(const std::string& path) {
  GzBuf buf(path);  // bounded inflation (a decompression bomb is refused), errors copied before close
  std::string out;
  char chunk[1 << 16];
  std::streamsize n;
  while ((n = buf.sgetn(chunk, sizeof chunk)) > 0) out.append(chunk, static_cast<std::size_t>(n));
  return out;
}

// Nodes -> workload trace: three lanes (host, compute stream, communication stream), nodes in a
// topological order of their dependencies (ties by id), dependencies as explicit end->start edges.
Trace build(const std::string& path, const std::string& format, std::vector<Node>& nodes, bool with_ctrl = true) {
  Trace t;
  t.source = path;
  t.format = format;
  t.measured = false;
  if (with_ctrl)
    for (auto& n : nodes) n.deps.insert(n.deps.end(), n.ctrl.begin(), n.ctrl.end());
  std::unordered_map<std::uint64_t, std::size_t> index;
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (!index.emplace(nodes[i].id, i).second) throw InputError(path, "node " + std::to_string(nodes[i].id) + ": duplicate id");
  std::vector<std::vector<std::size_t>> out(nodes.size());
  std::vector<std::uint32_t> indeg(nodes.size(), 0);
  std::uint64_t dangling = 0;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    auto& d = nodes[i].deps;
    std::sort(d.begin(), d.end());
    d.erase(std::unique(d.begin(), d.end()), d.end());
    for (std::uint64_t p : d) {
      auto it = index.find(p);
      if (it == index.end() || it->second == i) {
        ++dangling;
        continue;
      }
      out[it->second].push_back(i);
      indeg[i]++;
    }
  }
  if (dangling)
    t.note("chakra: dependency on a node the trace does not have", Severity::Info, std::to_string(dangling) + " dependencies dropped",
           dangling);
  // Kahn with a min-heap on id: deterministic and close to the trace's own order.
  std::vector<std::size_t> order;
  order.reserve(nodes.size());
  std::vector<std::size_t> heap;
  auto cmp = [&](std::size_t a, std::size_t b) { return nodes[a].id > nodes[b].id; };
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (indeg[i] == 0) heap.push_back(i);
  std::make_heap(heap.begin(), heap.end(), cmp);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), cmp);
    std::size_t u = heap.back();
    heap.pop_back();
    order.push_back(u);
    for (std::size_t v : out[u])
      if (--indeg[v] == 0) {
        heap.push_back(v);
        std::push_heap(heap.begin(), heap.end(), cmp);
      }
  }
  if (order.size() != nodes.size()) {
    // Control dependencies converted from PyTorch's operator nesting can point both ways between
    // a parent and its children: keep the data dependencies alone.
    bool had_ctrl = false;
    for (const auto& n : nodes) had_ctrl = had_ctrl || !n.ctrl.empty();
    if (with_ctrl && had_ctrl) {
      for (auto& n : nodes) {
        std::vector<std::uint64_t> data;
        for (std::uint64_t d : n.deps)
          if (std::find(n.ctrl.begin(), n.ctrl.end(), d) == n.ctrl.end()) data.push_back(d);
        n.deps = std::move(data);
        n.ctrl.clear();
      }
      Trace r = build(path, format, nodes, false);
      r.note("chakra: control dependencies formed a cycle; replayed with data dependencies only", Severity::Warning,
             std::to_string(nodes.size() - order.size()) + " nodes in the cycle");
      return r;
    }
    throw InputError(path, "dependency cycle among " + std::to_string(nodes.size() - order.size()) + " nodes");
  }
  Process p;
  p.name = format;
  t.processes.push_back(p);
  Device dev;
  dev.name = "unknown (execution trace)";
  t.devices.push_back(dev);
  const char* lane_names[] = {"host", "compute stream", "communication stream"};
  for (int l = 0; l < 3; ++l) {
    Lane ln;
    ln.kind = l == 0 ? LaneKind::Thread : LaneKind::Stream;
    ln.process = 0;
    ln.device = l == 0 ? kNone : 0;
    ln.native_id = static_cast<std::uint64_t>(l);
    ln.name = lane_names[l];
    // Dependencies order the nodes; the host runs any number at once, the GPU one compute node and
    // one communication node at a time, in the order they become ready.
    ln.fifo = false;
    ln.capacity = l == 0 ? kNone : 1;
    t.lanes.push_back(ln);
  }
  std::vector<OpId> op_of(nodes.size(), kNone);
  for (std::size_t k = 0; k < order.size(); ++k) {
    const Node& n = nodes[order[k]];
    Op op;
    op.name = t.strings.intern(n.name);
    op.set_duration(n.duration);
    bool comm = n.type >= 5 && n.type <= 7;
    if (n.cpu) {
      op.kind = OpKind::Api;
      op.lane = 0;
    } else {
      op.kind = OpKind::Kernel;
      op.lane = comm ? 2 : 1;
      if (comm) op.flags |= Op::kFlagNccl;
    }
    op_of[order[k]] = static_cast<OpId>(k);
    t.ops.push_back(op);
  }
  for (std::size_t i = 0; i < nodes.size(); ++i)
    for (std::size_t v : out[i]) t.deps.push_back({op_of[i], op_of[v], DepType::EndToStart, 0});
  t.finalize();
  return t;
}

// ---- Chakra JSON ---------------------------------------------------------------------------
std::vector<Node> chakra_json(const std::string& path, const json& j) {
  const json& g = j["workload_graph"];
  if (!g.is_array()) throw InputError(path, "\"workload_graph\" must be an array of nodes");
  std::vector<Node> nodes;
  nodes.reserve(g.size());
  for (std::size_t i = 0; i < g.size(); ++i) {
    const json& n = g[i];
    std::string rec = "workload_graph[" + std::to_string(i) + "]";
    if (!n.is_object() || !n.contains("Id") || !n["Id"].is_number_unsigned()) throw InputError(path, rec + ": needs a non-negative \"Id\"");
    Node x;
    x.id = n["Id"].get<std::uint64_t>();
    x.name = n.value("Name", std::string("node ") + std::to_string(x.id));
    x.type = n.value("NodeType", 4);
    x.cpu = n.value("is_cpu_op", false);
    double us = n.contains("runtime") && n["runtime"].is_number() ? n["runtime"].get<double>() : 0.0;
    if (us < 0) throw InputError(path, rec + ": negative \"runtime\"");
    if (!(us <= 4.6e15)) throw InputError(path, rec + ": \"runtime\" out of range (more than 2^62 ns)");
    x.duration = static_cast<TimeNs>(std::llround(us * 1000.0));
    for (const char* k : {"data_deps", "ctrlDeps", "ctrl_deps"}) {
      if (!n.contains(k)) continue;
      if (!n[k].is_array()) throw InputError(path, rec + ": \"" + k + "\" must be an array of ids");
      for (const auto& d : n[k])
        if (d.is_number_unsigned()) (k[0] == 'd' ? x.deps : x.ctrl).push_back(d.get<std::uint64_t>());
    }
    nodes.push_back(std::move(x));
  }
  return nodes;
}

// ---- PyTorch execution trace ----------------------------------------------------------------
std::vector<Node> pytorch_et(const std::string& path, const json& j) {
  const json& ns = j["nodes"];
  if (!ns.is_array()) throw InputError(path, "\"nodes\" must be an array");
  // Schema 1.0.1: inputs/input_shapes/input_types at the top; 1.0.3+: inputs: {values, shapes, types}.
  std::unordered_map<std::uint64_t, std::uint64_t> parent;
  std::unordered_map<std::uint64_t, int> children;
  for (const auto& n : ns) {
    if (!n.is_object() || !n.contains("id")) continue;
    std::uint64_t p = 0;
    if (n.contains("parent") && n["parent"].is_number_unsigned())
      p = n["parent"].get<std::uint64_t>();
    else if (n.contains("ctrl_deps") && n["ctrl_deps"].is_number_unsigned())
      p = n["ctrl_deps"].get<std::uint64_t>();
    parent[n["id"].get<std::uint64_t>()] = p;
    children[p]++;
  }
  std::vector<Node> nodes;
  std::unordered_map<std::uint64_t, std::uint64_t> last_writer;  // tensor id -> node
  auto tensor_ids = [](const json& values, const json& types, std::vector<std::uint64_t>& out) {
    if (!values.is_array()) return;
    for (std::size_t i = 0; i < values.size(); ++i) {
      bool tensor = types.is_array() && i < types.size() && types[i].is_string() && types[i].get<std::string>().rfind("Tensor", 0) == 0;
      if (tensor && values[i].is_array() && !values[i].empty() && values[i][0].is_number_unsigned())
        out.push_back(values[i][0].get<std::uint64_t>());
    }
  };
  for (std::size_t i = 0; i < ns.size(); ++i) {
    const json& n = ns[i];
    if (!n.is_object() || !n.contains("id") || !n["id"].is_number_unsigned() || !n.contains("name"))
      throw InputError(path, "nodes[" + std::to_string(i) + "]: needs \"id\" and \"name\"");
    std::uint64_t id = n["id"].get<std::uint64_t>();
    std::string name = n["name"].is_string() ? n["name"].get<std::string>() : "";
    if (children.count(id) || name.empty() || name[0] == '[') continue;  // not an operator leaf
    const json* in_v = nullptr;
    const json* in_s = nullptr;
    const json* in_t = nullptr;
    const json* out_v = nullptr;
    const json* out_t = nullptr;
    // A const object's operator[] on a missing key is undefined: look members up.
    auto member = [](const json& o, const char* k) -> const json* {
      auto it = o.find(k);
      return it == o.end() ? nullptr : &*it;
    };
    if (n.contains("inputs") && n["inputs"].is_object()) {
      in_v = member(n["inputs"], "values");
      in_s = member(n["inputs"], "shapes");
      in_t = member(n["inputs"], "types");
      if (n.contains("outputs") && n["outputs"].is_object()) {
        out_v = member(n["outputs"], "values");
        out_t = member(n["outputs"], "types");
      }
    } else {
      if (n.contains("inputs")) in_v = &n["inputs"];
      if (n.contains("input_shapes")) in_s = &n["input_shapes"];
      if (n.contains("input_types")) in_t = &n["input_types"];
      if (n.contains("outputs")) out_v = &n["outputs"];
      if (n.contains("output_types")) out_t = &n["output_types"];
    }
    Node x;
    x.id = id;
    x.name = name;
    if (in_s && in_s->is_array() && !in_s->empty()) x.name += ", sizes = " + in_s->dump();
    x.cpu = true;
    if (name.rfind("nccl:", 0) == 0 || name.rfind("c10d::", 0) == 0 || name == "record_param_comms") {
      x.cpu = false;
      x.type = 7;
    }
    std::vector<std::uint64_t> ins, outs;
    static const json none;
    if (in_v) tensor_ids(*in_v, in_t ? *in_t : none, ins);
    if (out_v) tensor_ids(*out_v, out_t ? *out_t : none, outs);
    for (std::uint64_t tid : ins)
      if (auto it = last_writer.find(tid); it != last_writer.end()) x.deps.push_back(it->second);
    for (std::uint64_t tid : outs) last_writer[tid] = id;
    nodes.push_back(std::move(x));
  }
  return nodes;
}

// ---- Chakra protobuf ------------------------------------------------------------------------
class Wire {
 public:
  Wire(const std::string& path, const std::string& b) : path_(path), b_(b) {}
  bool done() const { return p_ >= b_.size(); }
  std::size_t pos() const { return p_; }
  std::uint64_t varint() {
    std::uint64_t v = 0;
    for (int s = 0; s < 64; s += 7) {
      if (p_ >= b_.size()) fail("truncated varint");
      auto c = static_cast<unsigned char>(b_[p_++]);
      v |= static_cast<std::uint64_t>(c & 0x7F) << s;
      if (!(c & 0x80)) return v;
    }
    fail("varint too long");
  }
  std::string bytes() {
    std::uint64_t n = varint();
    if (n > b_.size() - p_) fail("length-delimited field runs past the end");
    std::string s = b_.substr(p_, n);
    p_ += n;
    return s;
  }
  void skip(int wire) {
    switch (wire) {
      case 0: varint(); break;
      case 1: advance(8); break;
      case 2: bytes(); break;
      case 5: advance(4); break;
      default: fail("unknown wire type " + std::to_string(wire));
    }
  }
  [[noreturn]] void fail(const std::string& what) const { throw InputError(path_, "protobuf: " + what + " at byte " + std::to_string(p_)); }

 private:
  void advance(std::size_t n) {
    if (n > b_.size() - p_) fail("fixed field runs past the end");
    p_ += n;
  }
  const std::string& path_;
  const std::string& b_;
  std::size_t p_ = 0;
};

std::vector<Node> chakra_protobuf(const std::string& path, const std::string& data) {
  Wire w(path, data);
  std::vector<Node> nodes;
  bool first = true;
  while (!w.done()) {
    std::string msg = w.bytes();
    if (first) {
      first = false;
      continue;
    }  // GlobalMetadata
    Wire m(path, msg);
    Node x;
    x.cpu = false;
    while (!m.done()) {
      std::uint64_t key = m.varint();
      int field = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7);
      auto repeated = [&](std::vector<std::uint64_t>& v) {
        if (wire == 2) {  // packed
          std::string pk = m.bytes();
          Wire q(path, pk);
          while (!q.done()) v.push_back(q.varint());
        } else {
          v.push_back(m.varint());
        }
      };
      switch (field) {
        case 1: x.id = m.varint(); break;
        case 2: x.name = m.bytes(); break;
        case 3: x.type = static_cast<int>(m.varint()); break;
        case 4: repeated(x.ctrl); break;
        case 5: repeated(x.deps); break;
        case 7: {  // microseconds; more than 2^62 ns cannot be a duration
          const std::uint64_t us = m.varint();
          if (us > (std::uint64_t{1} << 62) / kNsPerUs)
            throw InputError(path, "node " + std::to_string(x.id) + ": duration_micros out of range");
          x.duration = static_cast<TimeNs>(us) * kNsPerUs;
          break;
        }
        case 10: {  // AttributeProto: name = 1, a scalar value in some other field
          std::string a = m.bytes();
          Wire q(path, a);
          std::string an;
          std::uint64_t val = 0;
          while (!q.done()) {
            std::uint64_t k = q.varint();
            int f = static_cast<int>(k >> 3), wt = static_cast<int>(k & 7);
            if (f == 1 && wt == 2)
              an = q.bytes();
            else if (wt == 0)
              val = q.varint();
            else
              q.skip(wt);
          }
          if (an == "is_cpu_op") x.cpu = val != 0;
          break;
        }
        default: m.skip(wire);
      }
    }
    if (x.name.empty()) x.name = "node " + std::to_string(x.id);
    nodes.push_back(std::move(x));
  }
  return nodes;
}

}  // namespace

int ChakraImporter::sniff(const SniffInput& in) const {
  const std::string& path = in.path;
  auto ends = [&](const char* s) {
    std::string_view x(s);
    return path.size() >= x.size() && path.compare(path.size() - x.size(), x.size(), x) == 0;
  };
  if (ends(".et")) return 70;
  std::string_view h = in.head;
  if (!json_object_start(h)) return 0;
  if (in.keys) {
    if (in.has_key("workload_graph")) return 85;
    if (in.has_key("schema") && in.has_key("nodes") && !in.has_key("traceEvents")) return 85;
    return 0;
  }
  if (h.find("\"workload_graph\"") != std::string::npos) return 85;
  if (h.find("\"schema\"") != std::string::npos && h.find("\"nodes\"") != std::string::npos) return 85;
  if (h.find("\"schema\"") != std::string::npos && h.find("\"pid\"") != std::string::npos && h.find("\"traceEvents\"") == std::string::npos)
    return 60;
  return 0;
}

namespace {
Trace import_chakra(const std::string& path);
}  // namespace

Trace ChakraImporter::import(const std::string& path, const ImportOptions&) const {
  return with_json_errors(path, [&] { return import_chakra(path); });
}

namespace {
Trace import_chakra(const std::string& path) {
  std::string data = read_all(path);
  std::vector<Node> nodes;
  std::string format;
  auto p = data.find_first_not_of(" \t\r\n");
  if (p != std::string::npos && data[p] == '{') {
    json j = parse_json_input(data, path);
    if (j.contains("workload_graph")) {
      nodes = chakra_json(path, j);
      format = "chakra-json";
    } else if (j.contains("nodes")) {
      nodes = pytorch_et(path, j);
      format = "pytorch-et " + j.value("schema", std::string("?"));
    } else {
      throw InputError(path, "neither a Chakra graph (\"workload_graph\") nor a PyTorch execution trace (\"nodes\")");
    }
  } else {
    nodes = chakra_protobuf(path, data);
    format = "chakra-protobuf";
  }
  if (nodes.empty()) throw InputError(path, "no nodes");
  return build(path, format, nodes);
}
}  // namespace

}  // namespace bneck
