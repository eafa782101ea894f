// bneck_bench: import, graph, replay and memory figures on a synthetic Nsight Systems export.
//
//   bneck_bench [--kernels N] [--streams S] [--file PATH] [--bneck PATH] [--regenerate] [--structured] [--advise]
//   bneck_bench --kineto-mb MB [--file PATH] [--bneck PATH] [--regenerate]
//
// The second form writes a synthetic PyTorch-profiler (Kineto) trace of about MB megabytes, with
// the event mix of real ones (cpu_op with shapes, cudaLaunchKernel, kernel, ac2g flow pairs) and
// float-microsecond timestamps, and measures `bneck info FILE` (import, IR, structure): MB/s and
// peak RSS; then `bneck replay` of it beside Python's json.load, and of it gzipped (FILE.gz).
//
// It writes (once) a synthetic nsys SQLite export in the real schema: one host thread launching N
// kernels round-robin on S streams with cudaLaunchKernel, a cudaDeviceSynchronize every 10,000
// launches (kernel kinds at random, or with --structured in steps of 100 launches: 12 layers of the
// same 8 kernels, then 4 reductions). Then it measures, each in its own process:
//   baseline: SQLite stepping through the same rows and columns that bneck reads, and nothing else;
//   bneck:    `bneck replay FILE --json` (import, graph build, replay, analysis), its phase times
//             from the report's timing_s and its peak RSS from the kernel (wait4).
//   then `bneck structure FILE`, and with --advise `bneck advise FILE` (time and peak RSS).
#include <sqlite3.h>
#include <zlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace {

void die(const std::string& m) {
  std::fprintf(stderr, "bneck_bench: %s\n", m.c_str());
  std::exit(2);
}

void exec_sql(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) die(std::string("sql: ") + (err ? err : "?"));
}

void generate(const std::string& path, long kernels, int streams, bool structured) {
  std::remove(path.c_str());
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) die("cannot create " + path);
  exec_sql(db, "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA page_size=65536;");
  exec_sql(db,
           "CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT NOT NULL);"
           "CREATE TABLE META_DATA_EXPORT(name TEXT, value TEXT);"
           "CREATE TABLE TARGET_INFO_GPU(id INTEGER, name TEXT, smCount INTEGER, clockRate INTEGER, memoryBandwidth INTEGER,"
           " l2CacheSize INTEGER, totalMemory INTEGER, computeMajor INTEGER, computeMinor INTEGER);"
           "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME(start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,"
           " globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER);"
           "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,"
           " contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,"
           " demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, launchType INTEGER,"
           " cacheConfig INTEGER, registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL,"
           " gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL,"
           " staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL, localMemoryPerThread INTEGER,"
           " localMemoryTotal INTEGER, gridId INTEGER, sharedMemoryExecuted INTEGER, graphNodeId INTEGER);"
           "INSERT INTO META_DATA_EXPORT VALUES('EXPORT_PRODUCT_VERSION','2025.3.2.0 (synthetic)');"
           "INSERT INTO TARGET_INFO_GPU VALUES(0,'NVIDIA H200',132,1980000000,4814304000000,62914560,150109880320,9,0);"
           "INSERT INTO StringIds VALUES(1,'cudaLaunchKernel_v7000'),(2,'cudaDeviceSynchronize_v3020'),"
           "(10,'void gemm_kernel<float, 128>(float const*, float*)'),(11,'gemm_kernel'),"
           "(12,'void elementwise_kernel<4>(float*, int)'),(13,'elementwise_kernel'),"
           "(14,'void reduce_kernel(float const*, float*)'),(15,'reduce_kernel');"
           "BEGIN;");
  sqlite3_stmt *rt = nullptr, *kt = nullptr;
  sqlite3_prepare_v2(db, "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES(?,?,0,?,?,?,0,NULL)", -1, &rt, nullptr);
  sqlite3_prepare_v2(db, "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES(?,?,0,1,?,?,?,?,?,NULL,1,0,?,?,1,1,?,1,1,?,0,0,0,?,0,NULL)", -1,
                     &kt, nullptr);
  const std::int64_t gpid = (1ll << 48) | (4242ll << 24), gtid = gpid | 4242;
  std::vector<std::int64_t> free_at(static_cast<std::size_t>(streams), 0);
  std::int64_t t = 1'000'000'000, corr = 1;
  std::uint64_t rng = 12345;
  auto api = [&](std::int64_t s, std::int64_t e, std::int64_t c, int name) {
    sqlite3_bind_int64(rt, 1, s);
    sqlite3_bind_int64(rt, 2, e);
    sqlite3_bind_int64(rt, 3, gtid);
    sqlite3_bind_int64(rt, 4, c);
    sqlite3_bind_int(rt, 5, name);
    if (sqlite3_step(rt) != SQLITE_DONE) die("insert runtime");
    sqlite3_reset(rt);
  };
  for (long i = 0; i < kernels; ++i) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    int s = static_cast<int>(i % streams);
    // Random kinds, or a training-like structure: steps of 100 launches, 12 layers of the same 8
    // kernels then 4 reductions (no kernel occurs once a step: the structure search's hard case).
    static const int layer[8] = {0, 1, 1, 0, 1, 0, 0, 1};
    int kind = structured ? (i % 100 < 96 ? layer[(i % 100) % 8] : 2) : static_cast<int>((rng >> 33) % 3);
    std::int64_t dur = 2000 + static_cast<std::int64_t>((rng >> 20) % 20000);
    std::int64_t a0 = t, a1 = t + 2500;
    api(a0, a1, corr, 1);
    std::int64_t k0 = std::max(a0 + 4000, free_at[static_cast<std::size_t>(s)] + 600), k1 = k0 + dur;
    free_at[static_cast<std::size_t>(s)] = k1;
    sqlite3_bind_int64(kt, 1, k0);
    sqlite3_bind_int64(kt, 2, k1);
    sqlite3_bind_int(kt, 3, 13 + s);
    sqlite3_bind_int64(kt, 4, corr);
    sqlite3_bind_int64(kt, 5, gpid);
    sqlite3_bind_int(kt, 6, 10 + 2 * kind);
    sqlite3_bind_int(kt, 7, 11 + 2 * kind);
    sqlite3_bind_int(kt, 8, 32 + 8 * kind);
    sqlite3_bind_int(kt, 9, 132 * (1 + kind));
    sqlite3_bind_int(kt, 10, 256);
    sqlite3_bind_int(kt, 11, 1024 * kind);
    sqlite3_bind_int64(kt, 12, i);
    if (sqlite3_step(kt) != SQLITE_DONE) die("insert kernel");
    sqlite3_reset(kt);
    ++corr;
    t = a1 + 800;
    if ((i + 1) % 10000 == 0) {
      std::int64_t last = 0;
      for (auto f : free_at) last = std::max(last, f);
      std::int64_t s0 = t, s1 = std::max(t + 1500, last + 2500);
      api(s0, s1, corr++, 2);
      t = s1 + 5000;
    }
  }
  sqlite3_finalize(rt);
  sqlite3_finalize(kt);
  exec_sql(db, "COMMIT;");
  sqlite3_close(db);
}

double baseline_read(const std::string& path, long& rows) {
  auto t0 = std::chrono::steady_clock::now();
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) die("open");
  const char* queries[] = {
      "SELECT start,end,globalTid,correlationId,nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME",
      "SELECT start,end,deviceId,contextId,streamId,correlationId,globalPid,demangledName,shortName,gridX,gridY,gridZ,"
      "blockX,blockY,blockZ,registersPerThread,staticSharedMemory,dynamicSharedMemory,graphNodeId FROM CUPTI_ACTIVITY_KIND_KERNEL"};
  std::int64_t sink = 0;
  rows = 0;
  for (const char* q : queries) {
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db, q, -1, &st, nullptr);
    int nc = sqlite3_column_count(st);
    while (sqlite3_step(st) == SQLITE_ROW) {
      for (int c = 0; c < nc; ++c) sink += sqlite3_column_int64(st, c);
      ++rows;
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  if (sink == 42) std::puts("");
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// fork() with the parent's buffered output written first: a child that reopens stdout would write
// it a second time.
pid_t fork_flushed() {
  std::fflush(nullptr);
  return fork();
}

// Wall seconds of `argv` run in a child (found on PATH, its output to /dev/null); -1 if it failed.
double timed(const std::vector<std::string>& argv) {
  const auto t1 = std::chrono::steady_clock::now();
  pid_t q = fork_flushed();
  if (q == 0) {
    if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(1);
    std::vector<char*> a;
    for (const auto& x : argv) a.push_back(const_cast<char*>(x.c_str()));
    a.push_back(nullptr);
    execvp(a[0], a.data());
    _exit(127);
  }
  int st = 0;
  waitpid(q, &st, 0);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? secs : -1.0;
}

}  // namespace

// A synthetic Kineto trace of about `mb` MB.
void generate_kineto(const std::string& path, double mb) {
  std::ofstream o(path);
  if (!o) die("cannot write " + path);
  o << R"K({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200", "numSms": 132}], )K"
    << R"K("distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1}, "traceEvents": [)K"
    << "\n";
  const double target = mb * 1e6;
  double t = 5080223668421.487;
  long k = 0;
  char buf[2048];
  while (static_cast<double>(o.tellp()) < target) {
    long corr = 2 * k + 100;
    int n = std::snprintf(
        buf, sizeof buf,
        R"K(  {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 474, "tid": 474, "ts": %.3f, "dur": 30.125, "args": {"External id": %ld, "Record function id": 0, "Sequence number": %ld, "Fwd thread id": 0, "Ev Idx": %ld, "Input Dims": [[2048], [8192, 2048], [2048, 2048], [], []], "Input type": ["float", "float", "float", "Scalar", "Scalar"]}},)K"
        "\n"
        R"K(  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 474, "tid": 474, "ts": %.3f, "dur": 6.212, "args": {"External id": %ld, "cbid": 211, "correlation": %ld}},)K"
        "\n"
        R"K(  {"ph": "s", "id": %ld, "pid": 474, "tid": 474, "ts": %.3f, "cat": "ac2g", "name": "ac2g"},)K"
        "\n"
        R"K(  {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", "pid": 0, "tid": 7, "ts": %.3f, "dur": 21.504, "args": {"External id": %ld, "queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": %ld, "registers per thread": 168, "shared memory": 213248, "blocks per SM": 0.969697, "warps per SM": 3.878788, "grid": [128, 1, 1], "block": [384, 1, 1], "est. achieved occupancy %%": 6}},)K"
        "\n"
        R"K(  {"ph": "f", "id": %ld, "pid": 0, "tid": 7, "ts": %.3f, "cat": "ac2g", "name": "ac2g", "bp": "e"},)K"
        "\n",
        t, k, k, k, t + 2.1, k, corr, corr, t + 2.1, t + 9.3, k, corr, corr, t + 9.3);
    o.write(buf, n);
    t += 25.0;
    ++k;
  }
  o << R"K(  {"ph": "X", "cat": "Trace", "ts": 5080223667820.216, "dur": 1.0, "pid": "Spans", "tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)", "args": {"Op count": 0}}]})K"
    << "\n";
}

int kineto_bench(const std::string& file, double mb, const std::string& bneck, bool regenerate) {
  if (regenerate || !std::ifstream(file).good()) {
    std::fprintf(stderr, "generating %s: about %.0f MB of Kineto events...\n", file.c_str(), mb);
    generate_kineto(file, mb);
  }
  std::ifstream sz(file, std::ios::binary | std::ios::ate);
  double bytes = static_cast<double>(sz.tellg());
  auto t0 = std::chrono::steady_clock::now();
  pid_t pid = fork_flushed();
  if (pid == 0) {
    if (!freopen("/dev/null", "w", stdout)) _exit(1);
    execl(bneck.c_str(), bneck.c_str(), "info", file.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  struct rusage ru {};
  wait4(pid, &status, 0, &ru);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) die("bneck info failed");
  double rss_mb = static_cast<double>(ru.ru_maxrss) / 1024.0;
  std::printf("synthetic Kineto trace: %.0f MB\n", bytes / 1e6);
  std::printf("  bneck info (import, IR built, structure): %.2f s = %.0f MB/s, peak RSS %.0f MiB (%.2f x the file)\n", s, bytes / 1e6 / s,
              rss_mb, rss_mb * 1048576.0 / bytes);
  // bneck replay of it beside Python's json.load of the same file (where python3 runs).
  // The best of three runs of each, in turns (this machine's run-to-run noise is large: one run's
  // time alone moves 0.2-0.8 s on the 112 MB trace).
  auto best = [&](const std::vector<std::string>& argv, double& b) {
    const double x = timed(argv);
    if (x > 0 && (b < 0 || x < b)) b = x;
  };
  double replay = -1, py = -1;
  for (int k = 0; k < 3; ++k) {
    best({bneck, "replay", file}, replay);
    best({"python3", "-c", "import json, sys; json.load(open(sys.argv[1]))", file}, py);
  }
  if (replay > 0) std::printf("  bneck replay: %.2f s = %.0f MB/s (best of 3)\n", replay, bytes / 1e6 / replay);
  if (replay > 0 && py > 0) std::printf("  Python json.load of it: %.2f s, best of 3 (bneck replay %.1fx faster)\n", py, py / replay);
  // The same trace gzipped (written once beside it, as the profiler's use_gzip does): inflated
  // beside the parse.
  const std::string gz = file + ".gz";
  if (regenerate || !std::ifstream(gz).good()) {
    std::ifstream in(file, std::ios::binary);
    gzFile out = gzopen(gz.c_str(), "wb6");
    if (!out) die("cannot write " + gz);
    std::vector<char> b(1 << 20);
    while (in.read(b.data(), static_cast<std::streamsize>(b.size())) || in.gcount() > 0)
      gzwrite(out, b.data(), static_cast<unsigned>(in.gcount()));
    gzclose(out);
  }
  double gz_replay = -1;
  for (int k = 0; k < 3; ++k) best({bneck, "replay", gz}, gz_replay);
  if (gz_replay > 0)
    std::printf("  bneck replay of it gzipped: %.2f s = %.0f MB/s of JSON (best of 3; %.2fx the plain file's)\n", gz_replay,
                bytes / 1e6 / gz_replay, replay > 0 ? gz_replay / replay : 0.0);
  return 0;
}

int main(int argc, char** argv) {
  long kernels = 10'000'000;
  double kineto_mb = 0;
  int streams = 8;
  std::string file = "bench_nsys_10M.sqlite", bneck = BNECK_EXE;
  bool regenerate = false, structured = false, with_advise = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) die("missing value for " + a);
      return argv[++i];
    };
    if (a == "--kernels")
      kernels = std::stol(next());
    else if (a == "--streams")
      streams = std::stoi(next());
    else if (a == "--file")
      file = next();
    else if (a == "--bneck")
      bneck = next();
    else if (a == "--regenerate")
      regenerate = true;
    else if (a == "--advise")
      with_advise = true;
    else if (a == "--structured")
      structured = true;
    else if (a == "--kineto-mb")
      kineto_mb = std::stod(next());
    else
      die("unknown argument " + a);
  }
  if (kineto_mb > 0) return kineto_bench(file == "bench_nsys_10M.sqlite" ? "bench_kineto.json" : file, kineto_mb, bneck, regenerate);
  if (regenerate || !std::ifstream(file).good()) {
    std::fprintf(stderr, "generating %s: %ld kernels on %d streams...\n", file.c_str(), kernels, streams);
    auto t0 = std::chrono::steady_clock::now();
    generate(file, kernels, streams, structured);
    std::fprintf(stderr, "generated in %.1f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  // Baseline in a child process.
  long rows = 0;
  double base_s = 0;
  {
    int fd[2];
    if (pipe(fd) != 0) die("pipe");
    pid_t pid = fork_flushed();
    if (pid == 0) {
      long r = 0;
      double s = baseline_read(file, r);
      std::string msg = std::to_string(s) + " " + std::to_string(r);
      if (write(fd[1], msg.data(), msg.size()) < 0) _exit(1);
      _exit(0);
    }
    close(fd[1]);
    char buf[128] = {};
    if (read(fd[0], buf, sizeof buf - 1) < 0) die("read");
    close(fd[0]);
    waitpid(pid, nullptr, 0);
    std::sscanf(buf, "%lf %ld", &base_s, &rows);
  }
  // bneck replay in a child process; peak RSS from wait4.
  std::string json = file + ".replay.json";
  auto t0 = std::chrono::steady_clock::now();
  pid_t pid = fork_flushed();
  if (pid == 0) {
    if (!freopen("/dev/null", "w", stdout)) _exit(1);
    execl(bneck.c_str(), bneck.c_str(), "replay", file.c_str(), "--json", json.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  struct rusage ru {};
  wait4(pid, &status, 0, &ru);
  double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) die("bneck replay failed");
  std::ifstream in(json);
  auto j = nlohmann::json::parse(in);
  auto& ts = j["timing_s"];
  double rss_mb = static_cast<double>(ru.ru_maxrss) / 1024.0;
  double ops = static_cast<double>(rows);  // API calls + kernels: the ops of the IR
  std::printf("synthetic nsys export: %ld kernels on %d streams, %ld rows (kernels + API calls)\n", kernels, streams, rows);
  // The sqlite3 shell printing every row of both tables (to /dev/null), where it is installed.
  const double cli_s = timed({"sqlite3", file, "SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL; SELECT * FROM CUPTI_ACTIVITY_KIND_RUNTIME;"});
  std::printf("  sqlite3 reading the same rows and columns: %8.2f s (the SQLite library, stepping)\n", base_s);
  if (cli_s > 0) std::printf("  sqlite3 shell printing both tables:        %8.2f s\n", cli_s);
  std::printf("  bneck replay, whole process:               %8.2f s  (%.2fx the SQLite read", total_s, total_s / base_s);
  if (cli_s > 0) std::printf(", %.2fx the sqlite3 shell's", total_s / cli_s);
  std::printf(")\n");
  std::printf("    import %.2f s, graph %.2f s, replay %.2f s, analysis %.2f s\n", ts["import"].get<double>(), ts["graph"].get<double>(),
              ts["replay"].get<double>(), ts["analysis"].get<double>());
  auto& rss = j["peak_rss_mb_after"];
  std::printf("    peak RSS after import %.0f MiB, graph %.0f MiB, replay %.0f MiB, analysis %.0f MiB\n", rss["import"].get<double>(),
              rss["graph"].get<double>(), rss["replay"].get<double>(), rss["analysis"].get<double>());
  std::printf("  peak RSS %.0f MiB = %.1f bytes per op (%.1f per kernel)\n", rss_mb, rss_mb * 1048576.0 / ops,
              rss_mb * 1048576.0 / static_cast<double>(kernels));
  std::printf("  simulated makespan %.3f ms, measured %.3f ms\n", j["makespan_ns"].get<double>() / 1e6,
              j["measured_makespan_ns"].get<double>() / 1e6);
  // bneck structure on the same file: the whole process against the replay's.
  std::string sjson = file + ".structure.json";
  auto s0 = std::chrono::steady_clock::now();
  pid = fork_flushed();
  if (pid == 0) {
    if (!freopen("/dev/null", "w", stdout)) _exit(1);
    execl(bneck.c_str(), bneck.c_str(), "structure", file.c_str(), "--json", sjson.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  wait4(pid, &status, 0, &ru);
  double structure_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) die("bneck structure failed");
  std::ifstream sin(sjson);
  auto sj = nlohmann::json::parse(sin);
  std::printf("  bneck structure, whole process:            %8.2f s  (%.2fx the replay; import %.2f s, structure %.2f s, %.0f MiB)\n",
              structure_s, structure_s / total_s, sj["timing_s"]["import"].get<double>(), sj["timing_s"]["structure"].get<double>(),
              static_cast<double>(ru.ru_maxrss) / 1024.0);
  for (const auto& lv : sj["levels"])
    std::printf("    @%s: %zu instances\n", lv["name"].get<std::string>().c_str(), lv["count"].get<std::size_t>());
  if (!with_advise) return 0;
  // bneck advise on the same file: its replay, baseline and every suggestion's what-if (or, where
  // this machine's memory does not hold that, a stretch of the run's: then said).
  const std::string ajson = file + ".advise.json";
  auto a0 = std::chrono::steady_clock::now();
  pid = fork_flushed();
  if (pid == 0) {
    if (!freopen("/dev/null", "w", stdout)) _exit(1);
    execl(bneck.c_str(), bneck.c_str(), "advise", file.c_str(), "--json", ajson.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  wait4(pid, &status, 0, &ru);
  const double advise_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - a0).count();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) die("bneck advise failed");
  const double advise_mb = static_cast<double>(ru.ru_maxrss) / 1024.0;
  std::printf("  bneck advise, whole process:               %8.2f s  (%.2fx the replay), peak RSS %.0f MiB = %.1f bytes per op\n", advise_s,
              advise_s / total_s, advise_mb, advise_mb * 1048576.0 / ops);
  std::ifstream ain(ajson);
  const nlohmann::json aj = nlohmann::json::parse(ain, nullptr, false);
  if (aj.is_object() && aj.contains("window") && aj["window"].is_string() && !aj["window"].get<std::string>().empty()) {
    std::string w = aj["window"].get<std::string>();
    for (auto& c : w)
      if (c == '\n') c = ';';
    std::printf("    advised on a stretch: %s\n", w.c_str());
  }
  return 0;
}
