#include "traces/gzbuf.hpp"

#include <algorithm>

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
    std::string msg = m ? m : "?";  // copied: the text belongs to the stream
    throw InputError(path_, "corrupt gzip stream: " + msg);
  }
  if (n == 0) {
    // gzread returns 0 at a truncated gzip member's end too; zlib reports it as Z_BUF_ERROR.
    int err = 0;
    gzerror(f_, &err);
    if (err == Z_BUF_ERROR) throw InputError(path_, "truncated gzip stream");
    return traits_type::eof();
  }
  total_ += static_cast<std::uint64_t>(n);
  // Decompression bombs: real traces inflate 5-30x; past 64 MiB, more than 250x what was read of
  // the file is refused (a 900 kB bomb would otherwise become 900 MB in memory).
  const auto read = static_cast<std::uint64_t>(std::max<z_off_t>(1, gzoffset(f_)));
  if (total_ > (64ull << 20) && total_ > 250 * read)
    throw InputError(path_, "inflates to more than 250 times its compressed size: refused as a decompression bomb");
  setg(buf_, buf_, buf_ + n);
  return traits_type::to_int_type(*gptr());
}

}  // namespace bneck
