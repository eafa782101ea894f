// A JSON document walked in order through SAX-style handlers, parsed by simdjson (On Demand: its
// structural indexing runs on the fastest SIMD kernel the CPU has, chosen at run time by the
// library; the walk itself is scalar). The handlers are nlohmann's SAX shapes; a false return
// stops the walk.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace bneck {

class JsonSax {
 public:
  virtual ~JsonSax() = default;
  virtual bool null() = 0;
  virtual bool boolean(bool) = 0;
  virtual bool number_integer(std::int64_t) = 0;
  virtual bool number_unsigned(std::uint64_t) = 0;
  virtual bool number_float(double, std::string_view text) = 0;  // text: the number as written
  virtual bool string(std::string_view) = 0;                     // valid until the handler returns
  virtual bool start_object() = 0;
  virtual bool end_object() = 0;
  virtual bool start_array() = 0;
  virtual bool end_array() = 0;
  // `skip`: the handler needs nothing of this key's value: the walk passes over it unread.
  virtual bool key(std::string_view, bool& skip) = 0;  // unescaped; valid until the handler returns
  // After each member's value of an object: true to pass over the object's remaining members
  // unread (end_object still follows).
  virtual bool skip_rest() { return false; }
  // Before each element of an array, with where its text starts (`at`: in the walked buffer);
  // `skip`: the walk passes over the element unread.
  virtual bool element(const char* at, bool& skip) {
    (void)at;
    skip = false;
    return true;
  }
};

struct JsonWalk {
  bool ok = false;            // parsed to the end with every handler returning true
  bool handler_stop = false;  // a handler returned false
  std::size_t error_at = 0;   // byte offset of a parse error
  std::string error;          // what was wrong (empty when ok or a handler stopped)
  // JsonArrayWalker: the offset of the last element of the array that was started (npos: none).
  std::size_t element_at = static_cast<std::size_t>(-1);
  bool element_whole = false;  // that element was walked to its end
};

// `data[0, len)` followed by padding up to `capacity` (at least 64 bytes of it: simdjson's
// SIMDJSON_PADDING).
JsonWalk walk_json(const char* data, std::size_t len, std::size_t capacity, JsonSax& sax);

// Walks the elements of arrays, one document after another, with one parser whose memory is kept
// between documents (a large document read in pieces touches the memory of one piece, not of the
// whole: on this kind of machine a page touched for the first time costs more than parsing it).
class JsonArrayWalker {
 public:
  JsonArrayWalker();
  ~JsonArrayWalker();
  JsonArrayWalker(const JsonArrayWalker&) = delete;
  JsonArrayWalker& operator=(const JsonArrayWalker&) = delete;
  // The elements of the array that starts `data[0, len)` (padded as walk_json's), each walked as
  // walk_json walks a value, the array's own brackets not reported to `sax`. Text after the array
  // is not read. `close`: the offset of the array's closing bracket (when `ok`).
  JsonWalk elements(const char* data, std::size_t len, std::size_t capacity, JsonSax& sax, std::size_t& close);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace bneck
