// A small read-only SQLite wrapper: opens without ever writing, probes tables and columns,
// and turns every SQLite failure into an InputError naming the file.
#pragma once
#include <sqlite3.h>

#include <cstdint>
#include <set>
#include <string>
#include <string_view>

namespace bneck {

class SqliteDb;

class SqliteStmt {
 public:
  SqliteStmt(const SqliteDb& db, const std::string& sql);
  ~SqliteStmt();
  SqliteStmt(const SqliteStmt&) = delete;
  SqliteStmt& operator=(const SqliteStmt&) = delete;
  bool step();  // true while a row is available
  std::int64_t i64(int col) const { return sqlite3_column_int64(st_, col); }
  double f64(int col) const { return sqlite3_column_double(st_, col); }
  bool null(int col) const { return sqlite3_column_type(st_, col) == SQLITE_NULL; }
  std::string_view text(int col) const;
  std::uint64_t rows() const { return rows_; }

 private:
  const SqliteDb& db_;
  sqlite3_stmt* st_ = nullptr;
  std::string sql_;
  std::uint64_t rows_ = 0;
};

class SqliteDb {
 public:
  explicit SqliteDb(const std::string& path);  // read-only; throws InputError
  ~SqliteDb();
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;
  bool has_table(const std::string& t) const { return tables_.count(t) > 0; }
  std::set<std::string> columns(const std::string& table) const;
  const std::string& path() const { return path_; }
  sqlite3* handle() const { return db_; }
  [[noreturn]] void fail(const std::string& what) const;

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
  std::set<std::string> tables_;
};

}  // namespace bneck
