#include "traces/nsys/nsys_report.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim/base/error.hpp"

extern char** environ;

namespace bneck {

namespace {

constexpr std::string_view kReportMagic = "NVIDIA Tegra Profiler Report";

bool executable(const std::string& p) {
  struct stat sb {};
  return ::stat(p.c_str(), &sb) == 0 && S_ISREG(sb.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

// A private temporary folder, removed with everything in it when this goes out of scope.
class TempDir {
 public:
  explicit TempDir(const std::string& for_file) {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/bneck-nsys-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr)
      throw InputError(for_file,
                       "an Nsight Systems report: no temporary folder for its export (" + tmpl + ": " + std::strerror(errno) + ")");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

}  // namespace

bool is_nsys_report(std::string_view head) { return head.substr(0, kReportMagic.size()) == kReportMagic; }

bool named_nsys_report(const std::string& path) { return path.ends_with(".nsys-rep") || path.ends_with(".qdrep"); }

std::string find_nsys() {
  if (const char* e = std::getenv("BNECK_NSYS"); e && *e) return executable(e) ? std::string(e) : std::string();
  const char* p = std::getenv("PATH");
  std::string path = p ? p : "";
  for (std::size_t at = 0; at <= path.size();) {
    const std::size_t end = std::min(path.find(':', at), path.size());
    const std::string dir = path.substr(at, end - at);
    if (!dir.empty() && executable(dir + "/nsys")) return dir + "/nsys";
    at = end + 1;
  }
  return {};
}

Trace import_nsys_report(const std::string& path, const std::function<Trace(const std::string&)>& import_export) {
  // An export that is itself a report (a broken nsys) is not exported again.
  static thread_local bool exporting = false;
  if (exporting) throw InputError(path, "an Nsight Systems report where its SQLite export was expected");
  const std::string nsys = find_nsys();
  if (nsys.empty()) {
    const char* e = std::getenv("BNECK_NSYS");
    throw InputError(path, "Nsight Systems report; no nsys " + std::string(e && *e ? "at BNECK_NSYS" : "on PATH") +
                               ": read `nsys export --type sqlite " + std::filesystem::path(path).filename().string() + "`");
  }
  TempDir dir(path);
  const std::string out = dir.path() + "/report.sqlite", log = dir.path() + "/nsys.log";
  // Absolute paths: a name that starts with '-' is never taken for an option.
  std::error_code ec;
  const std::string in_abs = std::filesystem::absolute(path, ec).string(), out_abs = std::filesystem::absolute(out, ec).string();
  // nsys runs with its output to a log in the private folder; the report is only read.
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
  std::vector<std::string> args = {nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", out_abs, in_abs};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, nsys.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw InputError(path, "an Nsight Systems report: running " + nsys + " failed: " + std::strerror(rc));
  int status = 0;
  for (;;) {
    if (::waitpid(pid, &status, 0) >= 0) break;
    if (errno != EINTR) throw InputError(path, "an Nsight Systems report: could not wait for " + nsys + ": " + std::strerror(errno));
  }
  const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  struct stat sb {};
  if (!ok || ::stat(out.c_str(), &sb) != 0 || sb.st_size == 0) {
    std::string first;
    std::ifstream in(log);
    while (std::getline(in, first) && first.find_first_not_of(" \t\r") == std::string::npos) {}
    const std::string why =
        WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status)) : "killed by signal " + std::to_string(WTERMSIG(status));
    first = replace_all(replace_all(first, out_abs, "EXPORT"), dir.path(), "TMP");  // no random path in the line
    throw InputError(path,
                     "an Nsight Systems report: `nsys export --type sqlite` failed (" + why + (first.empty() ? "" : ": " + first) + ")");
  }
  struct Flag {
    explicit Flag(bool& f) : f_(f) { f_ = true; }
    ~Flag() { f_ = false; }
    bool& f_;
  } flag(exporting);
  try {
    Trace t = import_export(out);
    t.source = path;  // the report the user named, not the export removed with its folder
    return t;
  } catch (const InputError& e) {
    // What the export's reader found wrong is about this report: say it of the report.
    throw InputError(replace_all(e.full(), out, path + " (its SQLite export)"));
  }
}

}  // namespace bneck
