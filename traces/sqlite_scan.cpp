#include "traces/sqlite_scan.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include "traces/sqlite_db.hpp"

namespace bneck {

namespace {
constexpr std::size_t kRunBytes = 1u << 20;  // consecutive leaf pages read at once
constexpr std::size_t kMaxDepth = 64;        // a b-tree of 2^32 pages is under 20 levels deep

std::uint32_t be16(const std::uint8_t* p) { return (std::uint32_t{p[0]} << 8) | p[1]; }
std::uint32_t be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
}

// A varint at [p, end): its length (1-9 bytes), or 0 if it runs past end.
std::size_t varint(const std::uint8_t* p, const std::uint8_t* end, std::uint64_t& v) {
  v = 0;
  for (std::size_t i = 0; i < 9; ++i) {
    if (p + i >= end) return 0;
    if (i == 8) {
      v = (v << 8) | p[i];
      return 9;
    }
    v = (v << 7) | (p[i] & 0x7F);
    if (!(p[i] & 0x80)) return i + 1;
  }
  return 0;
}

// The bytes of a record field of serial type t; -1 for the reserved types 10 and 11.
std::int64_t serial_size(std::uint64_t t) {
  if (t <= 4) return static_cast<std::int64_t>(t);
  if (t == 5) return 6;
  if (t == 6 || t == 7) return 8;
  if (t == 8 || t == 9) return 0;
  if (t >= 12) return static_cast<std::int64_t>((t - 12) / 2);
  return -1;
}

std::string quoted(const std::string& s, char q) {
  std::string out(1, q);
  for (char c : s) {
    if (c == q) out += q;
    out += c;
  }
  return out + q;
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}
}  // namespace

SqliteScan::SqliteScan(const SqliteDb& db, const std::string& table, const std::vector<std::string>& columns) : path_(db.path()) {
  std::int64_t root = 0;
  {
    SqliteStmt st(db, "SELECT rootpage, sql FROM sqlite_master WHERE type = 'table' AND name = " + quoted(table, '\''));
    if (!st.step() || st.null(0)) unsupported("no table " + table);
    root = st.i64(0);
    if (upper(std::string(st.text(1))).find("WITHOUT ROWID") != std::string::npos) unsupported("a WITHOUT ROWID table");
  }
  struct Column {
    std::string name;
    bool has_default = false;
  };
  std::vector<Column> fields;  // the record's fields, in order
  {
    // table_xinfo lists generated columns too (not stored in the record the same way: refused).
    SqliteStmt st(db, "PRAGMA table_xinfo(" + quoted(table, '"') + ")");
    while (st.step()) {
      // cid, name, type, notnull, dflt_value, pk, hidden
      if (st.i64(6) != 0) unsupported("a generated or hidden column");
      fields.push_back({std::string(st.text(1)), !st.null(4)});
      const bool requested = std::find(columns.begin(), columns.end(), fields.back().name) != columns.end();
      if (requested && st.i64(5) != 0) unsupported("a primary-key column asked for (it may be the rowid's alias)");
    }
  }
  field_.assign(columns.size(), -1);
  has_default_.assign(columns.size(), 0);
  for (std::size_t c = 0; c < columns.size(); ++c)
    for (std::size_t f = 0; f < fields.size(); ++f)
      if (fields[f].name == columns[c]) {
        field_[c] = static_cast<int>(f);
        has_default_[c] = fields[f].has_default;
        max_field_ = std::max(max_field_, static_cast<int>(f));
        break;
      }
  value_.assign(columns.size(), 0);
  null_.assign(columns.size(), 1);
  type_.assign(static_cast<std::size_t>(max_field_ + 1), 0);
  offset_.assign(static_cast<std::size_t>(max_field_ + 1), 0);

  file_.fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (file_.fd < 0) unsupported(std::string("cannot open: ") + std::strerror(errno));
  std::uint8_t h[100];
  if (::pread(file_.fd, h, sizeof h, 0) != static_cast<ssize_t>(sizeof h) || std::memcmp(h, "SQLite format 3", 16) != 0)
    unsupported("no SQLite header");
  std::uint32_t ps = be16(h + 16);
  page_size_ = ps == 1 ? 65536 : ps;
  if (page_size_ < 512 || page_size_ > 65536 || (page_size_ & (page_size_ - 1)) != 0) unsupported("page size");
  if (h[18] != 1 || h[19] != 1) unsupported("not a rollback-journal database (WAL)");
  if (h[20] > page_size_ - 480) unsupported("reserved bytes");
  usable_ = page_size_ - h[20];
  struct stat sb {};
  if (::fstat(file_.fd, &sb) != 0) unsupported("fstat");
  const auto pages = static_cast<std::uint64_t>(sb.st_size) / page_size_;
  pages_ = static_cast<std::uint32_t>(std::min<std::uint64_t>(pages, 0xFFFFFFFEu));
  if (root < 1 || static_cast<std::uint64_t>(root) > pages_) unsupported("root page out of the file");
  root_ = static_cast<std::uint32_t>(root);
}

SqliteScan::Fd::~Fd() {
  if (fd >= 0) ::close(fd);
}

void SqliteScan::unsupported(const std::string& why) const { throw Unsupported(path_ + ": " + why); }

const std::uint8_t* SqliteScan::read_pages(std::uint32_t no, std::uint32_t run) {
  if (no < 1 || no > pages_) unsupported("page " + std::to_string(no) + " out of the file");
  if (no >= buf_first_ && no < buf_first_ + buf_count_) return buf_.data() + std::size_t{no - buf_first_} * page_size_;
  run = std::clamp<std::uint32_t>(run, 1, std::min<std::uint32_t>(pages_ - no + 1, static_cast<std::uint32_t>(kRunBytes / page_size_)));
  buf_.resize(std::size_t{run} * page_size_);
  const auto want = static_cast<ssize_t>(buf_.size());
  std::size_t got = 0;
  while (got < buf_.size()) {
    ssize_t r = ::pread(file_.fd, buf_.data() + got, buf_.size() - got, static_cast<off_t>((std::uint64_t{no} - 1) * page_size_ + got));
    if (r <= 0) {
      if (r < 0 && errno == EINTR) continue;
      break;
    }
    got += static_cast<std::size_t>(r);
  }
  if (static_cast<ssize_t>(got) != want) unsupported("short read");
  buf_first_ = no;
  buf_count_ = run;
  return buf_.data();
}

void SqliteScan::enter(std::uint32_t no, std::uint32_t run) {
  if (++visited_ > pages_ || stack_.size() >= kMaxDepth) unsupported("the b-tree revisits a page");
  const std::uint8_t* pg = read_pages(no, run);
  const std::uint32_t h = no == 1 ? 100 : 0;
  const std::uint8_t type = pg[h];
  const std::uint32_t cells = be16(pg + h + 3);
  if (type == 0x0D) {  // table leaf
    if (h + 8 + 2 * std::size_t{cells} > usable_) unsupported("leaf cell count");
    leaf_ = pg;
    leaf_hdr_ = h;
    leaf_content_ = be16(pg + h + 5);
    if (leaf_content_ == 0) leaf_content_ = 65536;
    leaf_cells_ = cells;
    leaf_next_ = 0;
    return;
  }
  if (type != 0x05) unsupported("page " + std::to_string(no) + " is not a table b-tree page");
  if (h + 12 + 2 * std::size_t{cells} > usable_) unsupported("interior cell count");
  Level lv;
  lv.kids.reserve(cells + 1);
  for (std::uint32_t i = 0; i < cells; ++i) {
    const std::uint32_t at = be16(pg + h + 12 + 2 * i);
    if (at < h + 12 + 2 * cells || at + 4 > usable_) unsupported("interior cell offset");
    lv.kids.push_back(be32(pg + at));
  }
  lv.kids.push_back(be32(pg + h + 8));
  stack_.push_back(std::move(lv));
}

bool SqliteScan::step() {
  for (;;) {
    if (leaf_ && leaf_next_ < leaf_cells_) {
      const std::uint32_t at = be16(leaf_ + leaf_hdr_ + 8 + 2 * leaf_next_++);
      // Within the page's content area (after the cell pointers, before its usable end).
      if (at < leaf_hdr_ + 8 + 2 * leaf_cells_ || at < leaf_content_ || at >= usable_) unsupported("leaf cell offset");
      const std::uint8_t* p = leaf_ + at;
      const std::uint8_t* end = leaf_ + usable_;
      std::uint64_t size = 0, rowid = 0;
      std::size_t n = varint(p, end, size);
      if (!n) unsupported("cell");
      p += n;
      n = varint(p, end, rowid);
      if (!n) unsupported("cell");
      p += n;
      // A table's rowids ascend through its leaves: a damaged page or pointer shows here.
      const auto id = static_cast<std::int64_t>(rowid);
      if (rows_ > 0 && id <= last_rowid_) unsupported("rowids out of order");
      last_rowid_ = id;
      const std::uint64_t x = usable_ - 35;
      if (size <= x) {
        if (size > static_cast<std::uint64_t>(end - p)) unsupported("payload past its page");
        decode(p, size);
      } else {
        overflowed(p, end, size);
        decode(overflow_.data(), size);
      }
      ++rows_;
      return true;
    }
    leaf_ = nullptr;
    if (!started_) {
      started_ = true;
      enter(root_, 1);
      continue;
    }
    while (!stack_.empty() && stack_.back().next == stack_.back().kids.size()) stack_.pop_back();
    if (stack_.empty()) return false;
    Level& top = stack_.back();
    const std::uint32_t child = top.kids[top.next++];
    std::uint32_t run = 1;  // the consecutive pages that follow among its siblings
    while (top.next - 1 + run < top.kids.size() && top.kids[top.next - 1 + run] == child + run) ++run;
    enter(child, run);
  }
}

// A payload larger than a page holds: its local part, then a chain of overflow pages.
void SqliteScan::overflowed(const std::uint8_t* p, const std::uint8_t* end, std::uint64_t size) {
  const std::uint64_t u = usable_, x = u - 35, m = ((u - 12) * 32 / 255) - 23;
  const std::uint64_t k = m + ((size - m) % (u - 4));
  const std::uint64_t local = k <= x ? k : m;
  if (local + 4 > static_cast<std::uint64_t>(end - p) || size > (std::uint64_t{1} << 26))
    unsupported("overflow cell");  // over 64 MiB: left to SQLite
  overflow_.assign(p, p + local);
  std::uint32_t next = be32(p + local);
  std::vector<std::uint8_t> ov(page_size_);
  std::uint64_t hops = 0;
  while (overflow_.size() < size) {
    if (next < 1 || next > pages_ || ++hops > pages_) unsupported("overflow chain");
    if (::pread(file_.fd, ov.data(), page_size_, static_cast<off_t>((std::uint64_t{next} - 1) * page_size_)) !=
        static_cast<ssize_t>(page_size_))
      unsupported("short read");
    const std::uint64_t take = std::min<std::uint64_t>(u - 4, size - overflow_.size());
    overflow_.insert(overflow_.end(), ov.data() + 4, ov.data() + 4 + take);
    next = be32(ov.data());
  }
}

// A record: a header (its size, then one serial type per field), then the fields' bodies.
void SqliteScan::decode(const std::uint8_t* rec, std::uint64_t size) {
  const std::uint8_t* end = rec + size;
  std::uint64_t hsize = 0;
  std::size_t n = varint(rec, end, hsize);
  if (!n || hsize > size || hsize < n) unsupported("record header");
  const std::uint8_t* h = rec + n;
  const std::uint8_t* hend = rec + hsize;
  std::uint64_t body = hsize;
  const int want = max_field_ + 1;  // type_ and offset_ hold that many (the constructor sized them)
  int fields = 0;
  while (h < hend && fields < want) {
    std::uint64_t t = *h;
    if (t < 0x80) {  // one byte: every serial type of an integer or NULL
      ++h;
    } else {
      n = varint(h, hend, t);
      if (!n) unsupported("record header");
      h += n;
    }
    const std::int64_t len = serial_size(t);
    if (len < 0) unsupported("reserved serial type");
    type_[static_cast<std::size_t>(fields)] = t;
    offset_[static_cast<std::size_t>(fields)] = body;
    body += static_cast<std::uint64_t>(len);
    if (body > size) unsupported("record body");
    ++fields;
  }
  for (std::size_t c = 0; c < field_.size(); ++c) {
    const int f = field_[c];
    if (f < 0 || f >= fields) {  // a column the table or this record lacks
      if (f >= 0 && has_default_[c]) unsupported("a short record of a column with a default");
      null_[c] = 1;
      continue;
    }
    const std::uint64_t t = type_[static_cast<std::size_t>(f)];
    const std::uint8_t* p = rec + offset_[static_cast<std::size_t>(f)];
    std::int64_t v = 0;
    switch (t) {
      case 0: null_[c] = 1; continue;
      case 8:
      case 9: v = static_cast<std::int64_t>(t - 8); break;
      case 1:
      case 2:
      case 3:
      case 4:
      case 5:
      case 6: {
        std::uint64_t u = p[0] & 0x80 ? ~std::uint64_t{0} : 0;  // sign-extended big-endian
        for (std::int64_t i = 0; i < serial_size(t); ++i) u = (u << 8) | p[i];
        v = static_cast<std::int64_t>(u);
        break;
      }
      default: unsupported("a real, text or blob value in an integer column");
    }
    null_[c] = 0;
    value_[c] = v;
  }
}

}  // namespace bneck
