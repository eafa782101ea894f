// A table's rows read straight from the SQLite file format (sqlite.org/fileformat2.html), for the
// large tables of an nsys export: the table's b-tree walked in rowid order, its leaf cells' records
// decoded for the integer columns asked for. SQLite's own scan (SqliteStmt) spends most of its time
// in its virtual machine and in per-column calls; this one reads pages with pread and decodes a
// record's header once.
//
// It covers the ordinary case and nothing else: a rollback-journal database of any page size, a
// rowid table, integer or NULL values in the columns asked for (a column the table lacks reads as
// NULL). Anything else (a WAL database, a WITHOUT ROWID table, a column that is the rowid's alias,
// a real, text or blob value, a record shorter than a column with a default, any structural
// inconsistency) throws SqliteScan::Unsupported, and the caller reads the file again through the
// SQLite library, which then reads it or names what is wrong. Every read is bounds-checked.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace bneck {

class SqliteDb;

class SqliteScan {
 public:
  struct Unsupported : std::runtime_error {
    using std::runtime_error::runtime_error;
  };
  // Opens the file again (read-only) and finds the table's root page and columns through `db`.
  SqliteScan(const SqliteDb& db, const std::string& table, const std::vector<std::string>& columns);
  SqliteScan(const SqliteScan&) = delete;
  SqliteScan& operator=(const SqliteScan&) = delete;

  bool step();  // true while a row is available
  bool null(int col) const { return null_[static_cast<std::size_t>(col)] != 0; }
  std::int64_t i64(int col) const { return value_[static_cast<std::size_t>(col)]; }
  std::uint64_t rows() const { return rows_; }

 private:
  struct Level {  // an interior page: its children in order, and the next to visit
    std::vector<std::uint32_t> kids;
    std::size_t next = 0;
  };
  // Page `no`, read with the `run` pages after it that the walk will visit next (consecutive).
  const std::uint8_t* read_pages(std::uint32_t no, std::uint32_t run);
  void enter(std::uint32_t no, std::uint32_t run);
  void overflowed(const std::uint8_t* p, const std::uint8_t* end, std::uint64_t size);
  [[noreturn]] void unsupported(const std::string& why) const;
  void decode(const std::uint8_t* rec, std::uint64_t size);

  struct Fd {  // closed however the constructor ends
    int fd = -1;
    ~Fd();
  } file_;
  std::string path_;
  std::uint32_t page_size_ = 0, usable_ = 0, pages_ = 0;
  std::vector<std::uint8_t> buf_;  // a run of consecutive pages read at once
  std::uint32_t buf_first_ = 0, buf_count_ = 0;
  std::uint32_t root_ = 0;
  bool started_ = false;
  std::vector<Level> stack_;
  std::uint64_t visited_ = 0;
  const std::uint8_t* leaf_ = nullptr;  // the leaf page being read (in buf_)
  std::uint32_t leaf_hdr_ = 0, leaf_cells_ = 0, leaf_next_ = 0, leaf_content_ = 0;
  std::int64_t last_rowid_ = 0;
  std::vector<int> field_;                 // per requested column: its field in the record, -1 if the table lacks it
  std::vector<std::uint8_t> has_default_;  // per requested column
  int max_field_ = -1;
  std::vector<std::uint64_t> type_, offset_;  // per field of the record being decoded
  std::vector<std::int64_t> value_;
  std::vector<std::uint8_t> null_;
  std::vector<std::uint8_t> overflow_;  // a payload assembled from overflow pages
  std::uint64_t rows_ = 0;
};

}  // namespace bneck
