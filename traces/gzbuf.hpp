// A std::streambuf over zlib's gzread: reads gzip and, transparently, plain files, so that the
// streamed JSON readers parse either without holding the document in memory.
#pragma once
#include <zlib.h>

#include <cstdint>
#include <memory>
#include <streambuf>
#include <string>
#include <string_view>

namespace bneck {

class GzBuf : public std::streambuf {
 public:
  explicit GzBuf(const std::string& path);  // throws InputError when the file cannot be opened
  ~GzBuf() override;
  GzBuf(const GzBuf&) = delete;
  GzBuf& operator=(const GzBuf&) = delete;
  std::uint64_t consumed() const { return total_ - static_cast<std::uint64_t>(egptr() - gptr()); }

 protected:
  int_type underflow() override;  // throws InputError on a corrupt or truncated gzip stream

 private:
  std::string path_;
  gzFile f_ = nullptr;
  char buf_[1 << 16];
  std::uint64_t total_ = 0;
};

// A file's whole content in memory, followed by at least `padding` readable bytes (what a SIMD
// parser reads past the end): a plain file mapped read-only where its last page leaves that
// room (the bytes past its end read as zeros), else read or inflated into a buffer padded with
// spaces.
struct WholeFile {
  std::shared_ptr<const char> data;
  std::size_t size = 0, capacity = 0;  // content; content + padding
};
// The whole file (gunzipped where it is gzip, with GzBuf's checks). Throws InputError.
WholeFile read_whole(const std::string& path, std::size_t padding);

// A file read whole as read_whole reads it, a gzip file of 8 MB or more (by its trailer) inflated on
// a thread of its own while the caller reads what is ready, so that parsing runs beside the
// inflating instead of after it. Other files are read at once.
class GrowingFile {
 public:
  GrowingFile(const std::string& path, std::size_t padding);
  ~GrowingFile();  // waits for the inflating thread
  GrowingFile(const GrowingFile&) = delete;
  GrowingFile& operator=(const GrowingFile&) = delete;
  // The content ready so far, at least `need` bytes of it unless the file is shorter (waits).
  // The views stay valid while this lives. Past an error, what was read before it.
  std::string_view upto(std::size_t need);
  // The file is read whole already (a plain file; not a gzip stream still inflating).
  bool complete() const;
  // The whole file and its padding (waits; throws the reading's InputError).
  const WholeFile& whole();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace bneck
