// The nsys importer's file-format reader (traces/sqlite_scan.hpp) against SQLite's own scan.
#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "helpers.hpp"
#include "sim/base/error.hpp"
#include "traces/importer.hpp"
#include "traces/json_io.hpp"
#include "traces/sqlite_db.hpp"
#include "traces/sqlite_scan.hpp"

using namespace bneck;
using namespace bneck::test;
namespace fs = std::filesystem;

namespace {

// Everything an import produced: the IR as JSON and the notes.
std::string imported(const std::string& path, bool scan) {
  ImportOptions opt;
  opt.progress = false;
  opt.sqlite_scan = scan;
  std::ostringstream out;
  try {
    const Trace t = load_trace(path, opt);
    for (const Op& o : t.ops)
      out << o.start << " " << o.duration() << " " << o.lane << " " << o.link << " " << o.extra << " " << int(o.kind) << " " << o.sub << " "
          << int(o.flags) << " " << t.strings.str(o.name) << "\n";
    for (const auto& [what, n] : t.anomalies) out << what << " " << n.count << " " << n.example << "\n";
    try {
      write_trace_json(t, out);  // the rest of the IR
    } catch (const std::exception& e) {
      out << "not written as JSON: " << e.what();  // a name that is not UTF-8 (a fuzz finding)
    }
  } catch (const InputError& e) { out << "error: " << e.what(); }
  return out.str();
}

void exec(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  INFO(sql << ": " << (err ? err : ""));
  sqlite3_free(err);
  REQUIRE(rc == SQLITE_OK);
}

// Runs `sql` on the database at `path`, one statement after another.
void change(const std::string& path, std::initializer_list<const char*> sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  for (const char* q : sql) exec(db, q);
  sqlite3_close(db);
}

// A small nsys-like export: `n` launches on one thread and their kernels on two streams, in a
// database of page size `page`; `kernel_extra` adds columns (with values) to the kernel table.
std::string export_db(const std::string& tag, int page, int n, const std::string& kernel_cols = "", const std::string& kernel_vals = "") {
  const std::string path = (fs::temp_directory_path() / ("bneck_scan_" + tag + ".sqlite")).string();
  fs::remove(path);
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  exec(db, "PRAGMA page_size = " + std::to_string(page));
  exec(db, "CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT NOT NULL)");
  exec(db, "INSERT INTO StringIds VALUES (1, 'cudaLaunchKernel_v7000'), (2, 'gemm'), (3, 'relu')");
  exec(db,
       "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME(start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER, globalTid INTEGER, "
       "correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER, callchainId INTEGER)");
  exec(db,
       "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId "
       "INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL, "
       "shortName INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, "
       "blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL, registersPerThread INTEGER NOT NULL, staticSharedMemory INTEGER NOT NULL, "
       "dynamicSharedMemory INTEGER NOT NULL" +
           kernel_cols + ")");
  exec(db, "BEGIN");
  const std::int64_t tid = (std::int64_t{7} << 24) | 7, pid = std::int64_t{7} << 24;
  for (int i = 0; i < n; ++i) {
    const std::int64_t t = 1'000'000'000'000LL + std::int64_t{i} * 5'000;  // large values: 6- and 8-byte integers
    exec(db, "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (" + std::to_string(t) + "," + std::to_string(t + 3'000) + ",1," +
                 std::to_string(tid) + "," + std::to_string(i + 1) + ",1,0,NULL)");
    exec(db, "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (" + std::to_string(t + 4'000) + "," +
                 std::to_string(t + 4'000 + 100 + i % 300) + ",0,1," + std::to_string(7 + i % 2) + "," + std::to_string(i + 1) + "," +
                 std::to_string(pid) + "," + std::to_string(2 + i % 2) + "," + std::to_string(2 + i % 2) + "," +
                 std::to_string(1 + i % 70'000) + ",1,1," + std::to_string(32 << (i % 3)) + ",1,1," + std::to_string(i % 255) + "," +
                 std::to_string(i % 3 ? 0 : -1) + "," + std::to_string(i % 5 * 1024) + kernel_vals + ")");
  }
  exec(db, "COMMIT");
  sqlite3_close(db);
  return path;
}

}  // namespace

TEST_CASE("the nsys file-format reader gives what SQLite gives", "[nsys][sqlite]") {
  // Page sizes from the smallest to the largest; a kernel row with a 9 kB text beside it (its
  // record continues on overflow pages at every page size here); a column added later (rows
  // before it hold no field for it).
  for (int page : {512, 4096, 65536}) {
    INFO("page size " << page);
    const std::string p = export_db("plain" + std::to_string(page), page, 1200);
    const std::string a = imported(p, true);
    CHECK(a.find("\"gemm\"") != std::string::npos);
    CHECK(a == imported(p, false));
    const std::string big = export_db("overflow" + std::to_string(page), page, 300, ", note TEXT", ", '" + std::string(9000, 'x') + "'");
    CHECK(imported(big, true) == imported(big, false));
  }
  {
    const std::string p = export_db("altered", 4096, 300);
    change(p, {"ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL ADD COLUMN graphNodeId INTEGER",
               "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET graphNodeId = 5 WHERE rowid % 7 = 0"});
    const std::string a = imported(p, true);
    CHECK(a == imported(p, false));
  }
  // The reader reads a column's values as they are stored: 0 and 1 (no body), 1- to 8-byte
  // integers, negative ones, NULL, and a column the table lacks as NULL.
  {
    const std::string p = export_db("values", 4096, 10);
    SqliteDb db(p);
    SqliteScan st(db, "CUPTI_ACTIVITY_KIND_KERNEL", {"deviceId", "contextId", "start", "staticSharedMemory", "absent", "gridX"});
    REQUIRE(st.step());
    CHECK(st.i64(0) == 0);
    CHECK(!st.null(0));
    CHECK(st.i64(1) == 1);
    CHECK(st.i64(2) == 1'000'000'004'000LL);
    CHECK(st.i64(3) == -1);
    CHECK(st.null(4));
    CHECK(st.i64(5) == 1);
    int rows = 1;
    while (st.step()) ++rows;
    CHECK(rows == 10);
    CHECK(st.rows() == 10);
  }
}

TEST_CASE("the nsys file-format reader leaves what it does not cover to SQLite", "[nsys][sqlite][errors]") {
  // A text value in an integer column: SQLite reads it as 0; the reader refuses the file and the
  // importer reads it through SQLite: the same trace.
  {
    const std::string p = export_db("text", 4096, 200);
    change(p, {"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET gridX = 'x12' WHERE rowid = 50"});
    SqliteDb sdb(p);
    SqliteScan st(sdb, "CUPTI_ACTIVITY_KIND_KERNEL", {"gridX"});
    auto all = [&] {
      while (st.step()) {}
    };
    CHECK_THROWS_AS(all(), SqliteScan::Unsupported);
    CHECK(imported(p, true) == imported(p, false));
  }
  // A WAL database: its last writes may be in the -wal file only SQLite reads.
  {
    const std::string p = export_db("wal", 4096, 100);
    change(p, {"PRAGMA journal_mode = WAL"});
    SqliteDb sdb(p);
    CHECK_THROWS_AS(SqliteScan(sdb, "CUPTI_ACTIVITY_KIND_KERNEL", {"start"}), SqliteScan::Unsupported);
    CHECK(imported(p, true) == imported(p, false));
    // A reader that gives up in its constructor leaves no file open.
    auto open_files = [] {
      std::size_t n = 0;
      for ([[maybe_unused]] const auto& e : fs::directory_iterator("/proc/self/fd")) ++n;
      return n;
    };
    const std::size_t before = open_files();
    for (int i = 0; i < 50; ++i) CHECK_THROWS_AS(SqliteScan(sdb, "CUPTI_ACTIVITY_KIND_KERNEL", {"start"}), SqliteScan::Unsupported);
    CHECK(open_files() == before);
  }
  // Damaged files: every page's type byte, cell count and first cell pointer overwritten in turn
  // (a b-tree page that is not one, cells past the page, a cell past the page's end), and the file
  // cut short: the same trace or the same one-line error as SQLite's own reading.
  {
    const std::string p = export_db("damage", 1024, 400);
    std::string bytes;
    {
      std::ifstream in(p, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    const std::size_t pages = bytes.size() / 1024;
    int compared = 0;
    for (std::size_t pg = 1; pg < pages; ++pg)
      for (std::size_t off : {0, 1, 2, 3, 4, 5, 7, 8, 9}) {
        std::string d = bytes;
        d[pg * 1024 + off] = static_cast<char>(static_cast<unsigned char>(d[pg * 1024 + off]) ^ 0x5A);
        const std::string q = (fs::temp_directory_path() / "bneck_scan_damaged.sqlite").string();
        std::ofstream(q, std::ios::binary) << d;
        INFO("page " << pg + 1 << " byte " << off);
        CHECK(imported(q, true) == imported(q, false));
        ++compared;
      }
    CHECK(compared > 100);
  }
}

TEST_CASE("the nsys file-format reader gives what SQLite gives on real exports", "[nsys][sqlite][extended]") {
  std::vector<std::string> files = {demo_trace()};
  for (const auto& root : {extra_dir() + "/traces", extra_dir() + "/fuzz-findings", source_dir() + "/validate/reference",
                           source_dir() + "/tests/fuzz", std::string(BNECK_TEST_DATA)})
    if (fs::exists(root))
      for (const auto& e : fs::recursive_directory_iterator(root))
        if (e.is_regular_file() && e.path().extension() == ".sqlite") files.push_back(e.path().string());
  REQUIRE(files.size() > 20);
  for (const auto& f : files) {
    INFO(f);
    CHECK(imported(f, true) == imported(f, false));
  }
}
