#include "tools/output.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <streambuf>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <vector>

#include "sim/base/error.hpp"

namespace bneck {

namespace fs = std::filesystem;

std::string json_text(const nlohmann::json& j, int indent) { return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace); }

namespace {

// std::cout for text reports: a line of more than kMaxLineChars characters (UTF-8 code points) is
// wrapped at its last space within the limit (or cut where there is none), each continuation
// indented as the line was plus four spaces.
class LineLimitBuf : public std::streambuf {
 public:
  explicit LineLimitBuf(std::streambuf* out) : out_(out) {}
  std::streambuf* target() const { return out_; }

 protected:
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    line_.push_back(traits_type::to_char_type(c));
    if (c == '\n') emit();
    return c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    for (std::streamsize i = 0; i < n; ++i) overflow(traits_type::to_int_type(s[i]));
    return n;
  }
  int sync() override {
    if (!line_.empty() && line_.back() == '\n') emit();
    return out_->pubsync();
  }

 private:
  static std::size_t chars(const std::string& s, std::size_t from, std::size_t to) {
    std::size_t n = 0;
    for (std::size_t i = from; i < to; ++i) n += (static_cast<unsigned char>(s[i]) & 0xC0) != 0x80;
    return n;
  }
  // The byte offset after `limit` characters from `from` (or the end).
  static std::size_t after_chars(const std::string& s, std::size_t from, std::size_t limit) {
    std::size_t i = from, n = 0;
    while (i < s.size() && (n < limit || (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80)) {
      n += (static_cast<unsigned char>(s[i]) & 0xC0) != 0x80;
      ++i;
    }
    return i;
  }
  void emit() {
    std::string body = line_.substr(0, line_.size() - 1);
    line_.clear();
    if (chars(body, 0, body.size()) <= kMaxLineChars) {
      out_->sputn(body.data(), static_cast<std::streamsize>(body.size()));
      out_->sputc('\n');
      return;
    }
    const std::size_t indent =
        std::min<std::size_t>(body.find_first_not_of(' ') == std::string::npos ? 0 : body.find_first_not_of(' '), 40);
    const std::string cont(indent + 4, ' ');
    std::size_t at = 0;
    bool first = true;
    while (at < body.size()) {
      const std::size_t room = kMaxLineChars - (first ? 0 : cont.size());
      std::size_t end = after_chars(body, at, room);
      if (end < body.size()) {
        const std::size_t sp = body.rfind(' ', end);
        if (sp != std::string::npos && sp > at + (first ? indent : 0)) end = sp;
      }
      std::string piece = (first ? "" : cont) + body.substr(at, end - at);
      out_->sputn(piece.data(), static_cast<std::streamsize>(piece.size()));
      out_->sputc('\n');
      at = body.find_first_not_of(' ', end);
      if (at == std::string::npos) break;
      first = false;
    }
  }
  std::streambuf* out_;
  std::string line_;
};

LineLimitBuf* g_limit = nullptr;

}  // namespace

void limit_stdout_lines() {
  static LineLimitBuf buf(std::cout.rdbuf());
  if (g_limit) return;
  g_limit = &buf;
  std::cout.rdbuf(&buf);
}

void print_text(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  va_list again;
  va_copy(again, ap);
  const int n = std::vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  if (n > 0) {
    std::string buf(static_cast<std::size_t>(n) + 1, '\0');
    std::vsnprintf(buf.data(), buf.size(), fmt, again);
    buf.resize(static_cast<std::size_t>(n));
    std::cout << buf;
  }
  va_end(again);
}

void write_output(const std::string& path, const std::function<void(std::ostream&)>& fill) {
  if (path == "-") {
    if (g_limit) {  // data (JSON, CSV, traces) goes out as it is
      std::cout.flush();
      std::ostream raw(g_limit->target());
      fill(raw);
      raw.flush();
      return;
    }
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
