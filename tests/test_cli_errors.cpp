// The CLI contract for bad input: exit code 2 and one error line naming the file (missing, empty,
// truncated or malformed inputs, usage errors, decompression bombs, fuzz findings), and outputs
// that are links, FIFOs or directories.
#include <zlib.h>

#include <catch2/catch.hpp>
#include <sqlite3.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <thread>

#include "helpers.hpp"

using namespace bneck;
using namespace bneck::test;
namespace fs = std::filesystem;

namespace {

void expect_bad_input(const std::string& path, const std::string& reason) {
  for (const char* cmd : {"info", "replay", "ops"}) {
    INFO(cmd << " " << path);
    Run r = run(std::string(cmd) + " '" + path + "'");
    CHECK(r.code == 2);
    CHECK(lines(r.err) == 1);
    CHECK_THAT(r.err, Catch::Contains(path) && Catch::Contains(reason));
    CHECK(r.out.empty());
  }
}

}  // namespace

TEST_CASE("bad input: one error line naming the file, exit code 2", "[cli][errors]") {
  fs::path d = tmp_dir();
  SECTION("missing file") { expect_bad_input((d / "nope.sqlite").string(), "no such file"); }
  SECTION("empty file") {
    std::ofstream((d / "empty.sqlite").string());
    expect_bad_input((d / "empty.sqlite").string(), "empty file");
  }
  SECTION("not a trace") {
    std::ofstream((d / "notes.txt").string()) << "these are my notes, not a trace\n";
    expect_bad_input((d / "notes.txt").string(), "unrecognised trace format");
  }
  SECTION("a tar archive of traces, plain and gzipped") {
    // A POSIX ustar header: the member's name, then "ustar" at byte 257 (a 512-byte block).
    std::string tar(1024, '\0');
    tar.replace(0, 10, "trace.json");
    tar.replace(257, 6, std::string("ustar\0", 6));
    std::ofstream((d / "traces.tar").string(), std::ios::binary) << tar;
    expect_bad_input((d / "traces.tar").string(), "a tar archive: unpack it");
    gzFile gz = gzopen((d / "traces.tar.gz").string().c_str(), "wb");
    REQUIRE(gz);
    gzwrite(gz, tar.data(), static_cast<unsigned>(tar.size()));
    gzclose(gz);
    expect_bad_input((d / "traces.tar.gz").string(), "a tar archive: unpack it");
  }
  SECTION("truncated SQLite export") {
    std::string whole = slurp(demo_trace());
    REQUIRE(whole.size() > 200000);
    for (std::size_t keep : {std::size_t{100}, std::size_t{4096}, std::size_t{150000}, whole.size() - 4096}) {
      fs::path p = d / ("truncated_" + std::to_string(keep) + ".sqlite");
      std::ofstream(p.string(), std::ios::binary) << whole.substr(0, keep);
      expect_bad_input(p.string(), "truncated");
    }
  }
  SECTION("SQLite without CUDA tables") {
    fs::path p = d / "other.sqlite";
    fs::remove(p);
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(p.string().c_str(), &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db, "CREATE TABLE recipes(name TEXT); INSERT INTO recipes VALUES('bread');", nullptr, nullptr, nullptr) ==
            SQLITE_OK);
    sqlite3_close(db);
    expect_bad_input(p.string(), "no CUDA activity tables");
  }
  SECTION("malformed JSON workload") {
    std::ofstream((d / "w.json").string()) << "{\"format\": \"bneck-workload\", \"ops\": [ {\"lane\": ";
    expect_bad_input((d / "w.json").string(), "malformed JSON");
  }
  SECTION("truncated Kineto trace, plain and gzip") {
    std::string ev = R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.5, "dur": 2, "args": {"correlation": 1}})";
    std::string text = R"({"schemaVersion": 1, "traceEvents": [)" + ev;
    for (int i = 0; i < 2000; ++i) text += ", " + ev;
    std::ofstream((d / "cut.json").string()) << text;  // no closing brackets
    expect_bad_input((d / "cut.json").string(), "malformed JSON at byte");
    text += "]}";
    gzFile f = gzopen((d / "cut.json.gz").string().c_str(), "wb");
    gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
    gzclose(f);
    std::string gz = slurp(d / "cut.json.gz");
    std::ofstream((d / "cut.json.gz").string(), std::ios::binary) << gz.substr(0, gz.size() / 2);
    expect_bad_input((d / "cut.json.gz").string(), "gzip");
  }
  SECTION("execution traces: a dependency cycle, a protobuf cut short") {
    std::ofstream((d / "cycle.json").string()) << R"({"workload_graph": [
      {"Id": 1, "Name": "a", "NodeType": 4, "runtime": 1, "data_deps": [2], "is_cpu_op": true},
      {"Id": 2, "Name": "b", "NodeType": 4, "runtime": 1, "data_deps": [1], "is_cpu_op": true}]})";
    expect_bad_input((d / "cycle.json").string(), "dependency cycle");
    std::ofstream((d / "cut.et").string(), std::ios::binary) << std::string("\x05\x0a\x03", 3);  // a 5-byte message holding 2
    expect_bad_input((d / "cut.et").string(), "protobuf");
  }
  SECTION("inputs are never modified") {
    fs::path p = d / "copy.sqlite";
    fs::copy_file(demo_trace(), p, fs::copy_options::overwrite_existing);
    fs::permissions(p, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
    auto before = slurp(p);
    auto mtime = fs::last_write_time(p);
    CHECK(run("replay '" + p.string() + "'").code == 0);
    CHECK(slurp(p) == before);
    CHECK(fs::last_write_time(p) == mtime);
    CHECK(!fs::exists(p.string() + "-journal"));
    CHECK(!fs::exists(p.string() + "-wal"));
    fs::permissions(p, fs::perms::owner_all);
  }
}

TEST_CASE("usage errors exit 2 and unknown subcommands get a suggestion", "[cli][errors]") {
  Run r = run("replya x.sqlite");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("did you mean 'replay'"));
  CHECK(run("replay").code == 2);
  CHECK(run("replay '" + demo_trace() + "' --range '('").code == 2);
  CHECK(run("ops '" + demo_trace() + "' --select 'speed>3'").code == 2);
  CHECK(run("--help").code == 0);
}

TEST_CASE("a decompression bomb is refused with bounded memory", "[cli][robust]") {
  // 400 MiB of spaces in a JSON string, gzip-compressed to about 400 kB (1000x).
  fs::path d = tmp_dir() / "bomb";
  fs::create_directories(d);
  const std::string path = (d / "bomb.json.gz").string();
  gzFile f = gzopen(path.c_str(), "wb9");
  REQUIRE(f);
  gzputs(f, "{\"traceEvents\": [{\"name\": \"");
  std::string chunk(1 << 20, ' ');
  for (int i = 0; i < 400; ++i) gzwrite(f, chunk.data(), static_cast<unsigned>(chunk.size()));
  gzputs(f, "\"}]}");
  gzclose(f);
  Run r = run("replay '" + path + "'");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains(path) && Catch::Contains("decompression bomb"));
  struct rusage ru {};
  ::getrusage(RUSAGE_CHILDREN, &ru);
  CHECK(ru.ru_maxrss < 512 * 1024);
  fs::remove_all(d);
}

TEST_CASE("outputs: a symlink is followed, a FIFO written in place, a directory refused", "[cli][output]") {
  fs::path d = tmp_dir() / "outputs";
  fs::remove_all(d);
  fs::create_directories(d);
  // A symlink to a file: the file gets the JSON, the link stays a link, no temporary is left.
  std::ofstream(d / "real.json") << "old";
  fs::create_symlink(d / "real.json", d / "link.json");
  Run r = run("replay '" + demo_trace() + "' --json '" + (d / "link.json").string() + "'");
  REQUIRE(r.code == 0);
  CHECK(fs::is_symlink(d / "link.json"));
  CHECK(nlohmann::json::parse(slurp(d / "real.json")).contains("makespan_ns"));
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(d)) files += e.path().filename().string().find(".tmp.") == std::string::npos ? 1 : 100;
  CHECK(files == 2);
  // A FIFO (as /dev/null or a pipe would be): written in place, still a FIFO afterwards.
  fs::path fifo = d / "pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::string got;
  std::thread reader([&] { got = slurp(fifo); });
  Run w = run("replay '" + demo_trace() + "' --json '" + fifo.string() + "'");
  reader.join();
  CHECK(w.code == 0);
  CHECK(fs::is_fifo(fifo));
  CHECK(nlohmann::json::parse(got).contains("makespan_ns"));
  // A private character device (the null device's numbers, in our own directory; root only): written
  // in place and still a device afterwards, as /dev/null must stay.
  fs::path node = d / "null";
  if (::mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0) {
    Run n = run("replay '" + demo_trace() + "' --json '" + node.string() + "' --chrome-trace '" + node.string() + "'");
    CHECK(n.code == 0);
    CHECK(fs::is_character_file(node));
  }
  // A directory: refused, exit 2, named.
  Run dir = run("replay '" + demo_trace() + "' --json '" + d.string() + "'");
  CHECK(dir.code == 2);
  CHECK_THAT(dir.err, Catch::Contains(d.string()) && Catch::Contains("is a directory"));
  fs::remove_all(d);
}

TEST_CASE("fuzz findings: directories, --jobs, WAL inputs, views and non-UTF-8 names", "[cli][robust]") {
  fs::path d = tmp_dir() / "robust";
  fs::remove_all(d);
  fs::create_directories(d);
  // A directory where a file is expected: exit 2, one line naming it.
  for (const std::string& cmd :
       {"whatif '" + demo_trace() + "' --hw '" + d.string() + "'", "whatif '" + demo_trace() + "' --scenario '" + d.string() + "'",
        "calibrate '" + d.string() + "' -o '" + (d / "x.json").string() + "'", "validate-report '" + d.string() + "' --hw h200-sxm"}) {
    INFO(cmd);
    Run r = run(cmd);
    CHECK(r.code == 2);
    CHECK(lines(r.err) == 1);
    CHECK_THAT(r.err, Catch::Contains(d.string()) && Catch::Contains("is a directory"));
  }
  CHECK(run("sweep '" + demo_trace() + "' --hw h200-sxm --jobs 100000").code == 2);
  // A WAL-mode copy of the demo trace: read immutable, nothing created beside it.
  fs::copy_file(demo_trace(), d / "wal.sqlite");
  {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open((d / "wal.sqlite").c_str(), &db) == SQLITE_OK);
    sqlite3_exec(db, "PRAGMA journal_mode=WAL;", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  for (const char* side : {"wal.sqlite-wal", "wal.sqlite-shm"}) fs::remove(d / side);
  CHECK(run("replay '" + (d / "wal.sqlite").string() + "'").code == 0);
  CHECK_FALSE(fs::exists(d / "wal.sqlite-wal"));
  CHECK_FALSE(fs::exists(d / "wal.sqlite-shm"));
  // $BNECK_EXTRA_TRACES/fuzz-findings: a recursive view ends at once (views are not data), and a kernel name
  // with invalid UTF-8 still gives valid JSON outputs.
  const std::string ff = extra_dir() + "/fuzz-findings/";
  if (fs::exists(ff + "utf8_kernel_name.sqlite")) {
    Run u = run("replay '" + ff + "utf8_kernel_name.sqlite' --json '" + (d / "u.json").string() + "' --chrome-trace '" +
                (d / "u_ct.json").string() + "'");
    CHECK(u.code == 0);
    CHECK_NOTHROW(nlohmann::json::parse(slurp(d / "u.json")));
    CHECK_NOTHROW(nlohmann::json::parse(slurp(d / "u_ct.json")));
    Run v = run("replay '" + ff + "hang_nsys_kernel_recursive_view.sqlite'");
    CHECK(v.code == 2);
    CHECK(lines(v.err) == 1);
    // A malformed schema: SQLite quotes the table's 20-line definition; the message is one line.
    for (const char* cmd : {"replay", "info"}) {
      Run m = run(std::string(cmd) + " '" + ff + "msg_nsys_multiline_schema_error.sqlite'");
      CHECK(m.code == 2);
      CHECK(lines(m.err) == 1);
      CHECK_THAT(m.err, Catch::Contains("msg_nsys_multiline_schema_error.sqlite: not a readable trace database"));
    }
    // A corrupt gzip stream's message (it was read after the stream was freed) and a PyTorch ET
    // node with "inputs": {} (a missing key read through a const object: heap overflow).
    for (const char* f : {"uaf_chakra_corrupt_gzip.json.gz", "uaf_chakra_corrupt_gzip_min.et"}) {
      Run g = run("replay '" + ff + f + "'");
      CHECK(g.code == 2);
      CHECK_THAT(g.err, Catch::Contains("corrupt gzip stream"));
    }
    CHECK(run("replay '" + ff + "ub_pyet_inputs_empty_object.json'").code == 0);
    // Regular expressions (RE2): a 100,000-character name under --range '.*' and a name~ pattern
    // that backtracks exponentially in std::regex both end at once.
    for (const char* f : {"regex_name_100000a.json", "regex_name_28a.json"}) {
      CHECK(run("replay '" + ff + f + "' --range '.*'").code == 0);
      CHECK(run("whatif '" + ff + f + "' --scale '2:name~(a*)*b'").code == 0);
    }
    CHECK(run("replay '" + demo_trace() + "' --range '(unclosed'").code == 2);
    // An empty scenario: the file is named.
    Run es = run("whatif '" + demo_trace() + "' --scenario '" + ff + "msg_scenario_empty_transforms.json'");
    CHECK(es.code == 2);
    CHECK_THAT(es.err, Catch::Contains("msg_scenario_empty_transforms.json"));
    // Timestamps near the int64 limits (they overflowed into nonsense figures with exit 0): exit 2.
    for (const char* f : {"ub_bneck_ts_extreme.json", "ub_kineto_ts_neg.json", "ub_kineto_ts_overflow.json", "ub_nsys_ts_extreme.sqlite",
                          "ub_fuzz_engine102.sqlite"}) {
      INFO(f);
      Run o = run("replay '" + ff + f + "'");
      CHECK(o.code == 2);
      CHECK_THAT(o.err, Catch::Contains("timestamp"));
    }
    // SQLite files whose ids and rowids claim billions of rows: memory stays bounded by the file.
    for (const char* f : {"mem_nsys_kernel_rowid_1e9.sqlite", "mem_nsys_kernel_rowid_int64max.sqlite", "mem_nsys_stringid_2p31.sqlite",
                          "mem_nsys_stringid_5e7.sqlite"}) {
      INFO(f);
      Run m = run("replay '" + ff + f + "'");
      CHECK((m.code == 0 || m.code == 2));
      struct rusage ru {};
      ::getrusage(RUSAGE_CHILDREN, &ru);
      CHECK(ru.ru_maxrss < 512 * 1024);  // KiB: the largest child so far stayed under 512 MiB
    }
    // Wrong types, numbers beyond double (1e400) and 100,000-deep documents in every JSON reader:
    // exit 2, one line naming the file (they were internal errors and stack overflows).
    for (const auto& e : fs::directory_iterator(ff)) {
      const std::string f = e.path().filename().string();
      if (e.path().extension() != ".json" || (f.rfind("e1_", 0) != 0 && f.rfind("crash_", 0) != 0)) continue;
      if (f == "e1_scenario_name_number.json") continue;  // a numeric name: the file's path names it instead
      std::string cmd = f.find("_hw_") != std::string::npos ? "whatif '" + demo_trace() + "' --hw '" + e.path().string() + "'"
                        : f.find("_calib_") != std::string::npos
                            ? "calibrate '" + e.path().string() + "' -o '" + (d / "c.json").string() + "'"
                        : f.find("_scenario_") != std::string::npos ? "whatif '" + demo_trace() + "' --scenario '" + e.path().string() + "'"
                                                                    : "replay '" + e.path().string() + "'";
      INFO(cmd);
      Run b = run(cmd);
      CHECK(b.code == 2);
      CHECK(lines(b.err) == 1);
      CHECK_THAT(b.err, Catch::Contains(e.path().string()));
    }
  }
  fs::remove_all(d);
}

TEST_CASE("libFuzzer findings exit 2 with one line naming the file", "[cli][robust]") {
  // tests/fuzz/regressions: a bneck workload whose end - start overflowed (times now bounded to
  // 2^62 ns), a Chakra protobuf node whose duration_micros x 1000 overflowed, and a measurements
  // file asking for 16.7 M launches (12.5 GB of ops from 3.5 kB; counts now bounded).
  const std::string r = std::string(BNECK_SOURCE_DIR) + "/tests/fuzz/regressions/";
  for (const char* f : {"ub_workload_time_overflow.json", "ub_chakra_pb_duration_overflow.et"}) {
    Run x = run("replay '" + r + f + "'");
    INFO(f << ": " << x.err);
    CHECK(x.code == 2);
    CHECK(lines(x.err) == 1);
    CHECK_THAT(x.err, Catch::Contains(f) && Catch::Contains("out of range"));
  }
  // An nsys export whose copies were bound by PCIe in the sharing table: its binding code (3)
  // indexed a 3-entry array (heap overflow under ASan; tests/fuzz runs it as a seed too).
  CHECK(run("replay '" + r + "asan_replay_pcie_binding.sqlite'").code == 0);
  Run m = run("validate-report '" + r + "oom_measurements_launch_kernels.json' --hw h200-sxm");
  CHECK(m.code == 2);
  CHECK(lines(m.err) == 1);
  CHECK_THAT(m.err, Catch::Contains("\"kernels\" out of range"));
  // a stream measurement with 1.6e76 blocks (converted to an integer grid: undefined
  // behaviour under UBSan); every number of a record is now bounded to 0 .. 1e15.
  m = run("validate-report '" + r + "ub_measurements_blocks_overflow.json' --hw h200-sxm");
  CHECK(m.code == 2);
  CHECK(lines(m.err) == 1);
  CHECK_THAT(m.err, Catch::Contains("ub_measurements_blocks_overflow.json") && Catch::Contains("\"blocks\" out of range"));
}
