#include "traces/gzbuf.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>
#include <sys/stat.h>
#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "sim/base/error.hpp"

#if defined(BNECK_HAVE_ISAL)
#include <isa-l/igzip_lib.h>
#endif

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

namespace {
#if defined(BNECK_HAVE_ISAL)
// A one-member gzip file inflated by ISA-L's igzip (2-3x zlib's speed) into out[0, room), `publish`
// told of each megabyte: true when the member ended with its CRC checked, its length `isize` (the
// trailer's, mod 2^32) and nothing after it, or when the output outgrew `room` (`overflow`: the
// caller reads it again whole); false on anything else (an error, a second member, a truncated
// stream), where `size` bytes were given and zlib reads the file again to say what is wrong.
bool isal_inflate_file(const std::string& path, std::size_t isize, char* out, std::size_t room,
                       const std::function<void(std::size_t)>& publish, std::size_t& size, bool& overflow) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return false;
  std::vector<std::uint8_t> in(std::size_t{1} << 20);
  inflate_state st;
  isal_inflate_init(&st);
  st.crc_flag = ISAL_GZIP;
  bool eof = false;
  for (;;) {
    if (st.avail_in == 0 && !eof) {
      const std::size_t have = std::fread(in.data(), 1, in.size(), f.get());
      eof = have < in.size();
      st.next_in = in.data();
      st.avail_in = static_cast<std::uint32_t>(have);
    }
    if (size == room) {  // more than the trailer said: the caller reads it whole
      overflow = true;
      return true;
    }
    st.next_out = reinterpret_cast<std::uint8_t*>(out + size);
    st.avail_out = static_cast<std::uint32_t>(std::min<std::size_t>(std::size_t{1} << 20, room - size));
    const int r = isal_inflate(&st);
    size = static_cast<std::size_t>(reinterpret_cast<char*>(st.next_out) - out);
    publish(size);
    if (r != ISAL_DECOMP_OK) return false;
    if (st.block_state == ISAL_BLOCK_FINISH) {
      std::uint8_t extra = 0;
      const bool more = st.avail_in > 0 || (!eof && std::fread(&extra, 1, 1, f.get()) == 1);
      return !more && static_cast<std::uint32_t>(isize) == static_cast<std::uint32_t>(size);
    }
    if (st.avail_in == 0 && eof) return false;  // truncated
  }
}
#endif

// A gzip file's trailer ISIZE (the last member's size mod 2^32, little-endian) where it is
// plausible for the file's size (at least half of it, at most the bomb check's 250x); 0 if not.
std::size_t trailer_size(std::FILE* f, const struct stat& st) {
  unsigned char t[4] = {0, 0, 0, 0};
  if (st.st_size < 18 || std::fseek(f, -4, SEEK_END) != 0 || std::fread(t, 1, 4, f) != 4) return 0;
  const std::size_t isize = t[0] | (std::size_t{t[1]} << 8) | (std::size_t{t[2]} << 16) | (std::size_t{t[3]} << 24);
  const auto size = static_cast<std::size_t>(st.st_size);
  return isize >= size / 2 && isize <= size * 250 ? isize : 0;
}
}  // namespace

WholeFile read_whole(const std::string& path, std::size_t padding) {
  unsigned char magic[2] = {0, 0};
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw InputError(path, "cannot open for reading");
  const std::size_t m = std::fread(magic, 1, 2, f);
  struct stat st {};
  const bool sized = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode);
  WholeFile w;
  const bool plain = !(m == 2 && magic[0] == 0x1f && magic[1] == 0x8b) && sized;
#if defined(__linux__)
  // A plain file of a megabyte or more: mapped, its pages brought in at once, no copy. The
  // padding is the rest of its last page (zeros past the end), where there is room for it.
  if (plain) {
    const auto size = static_cast<std::size_t>(st.st_size);
    const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    const std::size_t mapped = (size + page - 1) / page * page;
    if (size >= (std::size_t{1} << 20) && mapped - size >= padding) {
      void* p = mmap(nullptr, mapped, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fileno(f), 0);
      std::fclose(f);
      if (p == MAP_FAILED) throw InputError(path, "cannot map the file for reading");
      w.data = std::shared_ptr<const char>(static_cast<const char*>(p), [mapped](const char* q) { munmap(const_cast<char*>(q), mapped); });
      w.size = size;
      w.capacity = mapped;
      return w;
    }
  }
#endif
  std::unique_ptr<char[]> buf;
  auto grow = [&](std::size_t cap) {  // uninitialized: the reads write it
    std::unique_ptr<char[]> d(new char[cap + padding]);
    if (w.size) std::copy(buf.get(), buf.get() + w.size, d.get());
    buf = std::move(d);
    w.capacity = cap + padding;
  };
  if (plain) {  // one read of its size
    const auto size = static_cast<std::size_t>(st.st_size);
    grow(size);
    std::rewind(f);
    w.size = std::fread(buf.get(), 1, size, f);
    std::fclose(f);
    if (w.size != size)
      throw InputError(path, "could not read the whole file (" + std::to_string(w.size) + " of " + std::to_string(size) + " bytes)");
  } else {
    // The gzip trailer's ISIZE (the last member's size mod 2^32, little-endian) sizes the buffer
    // at once for a one-member file under 4 GiB, where it is plausible (no more than the bomb
    // check's 250x); else 8x the file, grown by doubling.
    std::size_t first = sized ? static_cast<std::size_t>(st.st_size) * 8 : 0;
    if (const std::size_t isize = sized ? trailer_size(f, st) : 0) first = isize + (1 << 16) + 1;  // room for the read that sees the end
    std::fclose(f);
    GzBuf gz(path);
    grow(std::max<std::size_t>(1 << 20, first));
    for (;;) {
      if (w.capacity - padding - w.size < (1 << 16)) grow(2 * (w.capacity - padding));
      const std::streamsize got = gz.sgetn(buf.get() + w.size, static_cast<std::streamsize>(w.capacity - padding - w.size));
      if (got <= 0) break;
      w.size += static_cast<std::size_t>(got);
    }
  }
  std::fill(buf.get() + w.size, buf.get() + w.capacity, ' ');
  w.data = std::shared_ptr<const char>(buf.release(), std::default_delete<char[]>());
  return w;
}

struct GrowingFile::State {
  std::string path;
  std::size_t padding = 0;
  std::mutex mu;
  std::condition_variable cv;
  std::unique_ptr<char[]> buf;  // while inflating (then owned by `file`)
  std::size_t capacity = 0;     // of buf, padding included
  std::size_t ready = 0;        // bytes inflated (under mu)
  bool done = false, overflow = false;
  std::exception_ptr error;
  WholeFile file;
  bool have_file = false;
  std::thread inflater;
};

GrowingFile::GrowingFile(const std::string& path, std::size_t padding) : s_(std::make_unique<State>()) {
  s_->path = path;
  s_->padding = padding;
  // A gzip file whose trailer gives a plausible size of 8 MB or more: inflated beside the reader.
  std::size_t isize = 0;
  if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
    unsigned char magic[2] = {0, 0};
    struct stat st {};
    const bool gz = std::fread(magic, 1, 2, f) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    if (gz && fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode)) isize = trailer_size(f, st);
    std::fclose(f);
  }
  if (isize < (std::size_t{8} << 20)) {
    s_->file = read_whole(path, padding);
    s_->have_file = s_->done = true;
    s_->ready = s_->file.size;
    return;
  }
  s_->capacity = isize + (1 << 16) + 1 + padding;  // room for the read that sees the end
  s_->buf.reset(new char[s_->capacity]);
  State* st = s_.get();
  st->inflater = std::thread([st, isize] {
    std::size_t size = 0;
    try {
      const std::size_t room = st->capacity - st->padding;
      auto publish = [st](std::size_t n) {
        std::lock_guard<std::mutex> lock(st->mu);
        st->ready = n;
        st->cv.notify_all();
      };
      bool whole = false;
#if defined(BNECK_HAVE_ISAL)
      whole = isal_inflate_file(st->path, isize, st->buf.get(), room, publish, size, st->overflow);
#else
      (void)isize;
#endif
      // zlib from the start where the fast inflate did not read the file whole: what it gave is
      // read again and passed over (the same bytes: the reader may hold them), zlib's checks and
      // errors then stand.
      if (!whole) {
        GzBuf gz(st->path);
        for (std::size_t skipped = 0; skipped < size;) {
          char scratch[1 << 16];
          const std::streamsize got = gz.sgetn(scratch, static_cast<std::streamsize>(std::min(sizeof scratch, size - skipped)));
          if (got <= 0) throw InputError(st->path, "corrupt gzip stream: it ends before what was read of it");
          skipped += static_cast<std::size_t>(got);
        }
        for (;;) {
          const std::size_t want = std::min<std::size_t>(std::size_t{1} << 20, room - size);
          if (want == 0) {  // more than the trailer said (several members): read_whole reads it
            char c = 0;
            if (gz.sgetn(&c, 1) > 0) st->overflow = true;
            break;
          }
          const std::streamsize got = gz.sgetn(st->buf.get() + size, static_cast<std::streamsize>(want));
          if (got <= 0) break;
          size += static_cast<std::size_t>(got);
          publish(size);
        }
      }
      std::fill(st->buf.get() + size, st->buf.get() + st->capacity, ' ');
    } catch (...) { st->error = std::current_exception(); }
    std::lock_guard<std::mutex> lock(st->mu);
    st->ready = size;
    st->done = true;
    st->cv.notify_all();
  });
}

GrowingFile::~GrowingFile() {
  if (s_->inflater.joinable()) s_->inflater.join();
}

bool GrowingFile::complete() const {
  if (s_->have_file) return true;
  std::lock_guard<std::mutex> lock(s_->mu);
  return s_->done && !s_->error && !s_->overflow;
}

std::string_view GrowingFile::upto(std::size_t need) {
  if (s_->have_file) return {s_->file.data.get(), s_->file.size};
  std::unique_lock<std::mutex> lock(s_->mu);
  s_->cv.wait(lock, [&] { return s_->done || s_->ready >= need; });
  return {s_->buf.get(), s_->ready};
}

const WholeFile& GrowingFile::whole() {
  if (s_->have_file) return s_->file;
  if (s_->inflater.joinable()) s_->inflater.join();
  if (s_->error) std::rethrow_exception(s_->error);
  if (s_->overflow) {
    s_->file = read_whole(s_->path, s_->padding);
  } else {
    s_->file.size = s_->ready;
    s_->file.capacity = s_->capacity;
    s_->file.data = std::shared_ptr<const char>(s_->buf.release(), std::default_delete<char[]>());
  }
  s_->have_file = true;
  return s_->file;
}

}  // namespace bneck
