#include "tools/output.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <vector>

#include "sim/base/error.hpp"

namespace bneck {

namespace fs = std::filesystem;

std::string json_text(const nlohmann::json& j, int indent) { return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace); }

void write_output(const std::string& path, const std::function<void(std::ostream&)>& fill) {
  if (path == "-") {
    fill(std::cout);
    std::cout.flush();
    return;
  }
  if (path.empty()) throw InputError("output", "empty file name");
  // A symlink is followed: its target is written and the link stays a link.
  std::error_code ec;
  fs::path target = path;
  if (fs::is_symlink(fs::symlink_status(target, ec))) {
    fs::path resolved = fs::weakly_canonical(target, ec);
    if (ec) throw InputError(path, "cannot resolve the symbolic link: " + ec.message());
    target = resolved;
  }
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw InputError(path, "is a directory");
    if (!S_ISREG(st.st_mode)) {
      // A device, FIFO or socket (/dev/null, a pipe): written in place, never replaced.
      std::ofstream out(target, std::ios::binary);
      if (!out) throw InputError(path, "cannot write");
      fill(out);
      out.flush();
      if (!out) throw InputError(path, "write failed");
      return;
    }
  }
  // A regular file: written to a fresh temporary beside it (created exclusively, unpredictable
  // name), then renamed over it, so that readers never see a partial file.
  std::string tmpl = target.string() + ".tmp.XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  int fd = ::mkstemp(name.data());
  if (fd < 0) throw InputError(path, std::string("cannot write (") + std::strerror(errno) + ")");
  ::close(fd);
  const std::string tmp(name.data());
  try {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError(path, "cannot write (directory missing or not writable)");
    fill(out);
    out.flush();
    if (!out) throw InputError(path, "write failed (disk full?)");
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  // Keep a replaced file's permissions (mkstemp makes 0600); a new file gets the usual 0644 less umask.
  mode_t mode = 0644;
  if (::stat(target.c_str(), &st) == 0) {
    mode = st.st_mode & 07777;
  } else {
    mode_t mask = ::umask(0);
    ::umask(mask);
    mode = 0666 & ~mask;
  }
  ::chmod(tmp.c_str(), mode);
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw InputError(path, "cannot replace the file");
  }
}

}  // namespace bneck
