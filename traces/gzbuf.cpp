#include "traces/gzbuf.hpp"

#include "sim/base/error.hpp"

namespace bneck {

GzBuf::GzBuf(const std::string& path) : path_(path) {
  f_ = gzopen(path.c_str(), "rb");
  if (!f_) throw InputError(path, "cannot open for reading");
  gzbuffer(f_, 1 << 20);
}

GzBuf::~GzBuf() {
  if (f_) gzclose(f_);
}

GzBuf::int_type GzBuf::underflow() {
  if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
  int n = gzread(f_, buf_, sizeof buf_);
  if (n < 0) {
    int err = 0;
    const char* m = gzerror(f_, &err);
    throw InputError(path_, std::string("corrupt gzip stream: ") + (m ? m : "?"));
  }
  if (n == 0) {
    // gzread returns 0 at a truncated gzip member's end too; zlib reports it as Z_BUF_ERROR.
    int err = 0;
    gzerror(f_, &err);
    if (err == Z_BUF_ERROR) throw InputError(path_, "truncated gzip stream");
    return traits_type::eof();
  }
  total_ += static_cast<std::uint64_t>(n);
  setg(buf_, buf_, buf_ + n);
  return traits_type::to_int_type(*gptr());
}

}  // namespace bneck
