#include "traces/sqlite_db.hpp"

#include <cctype>

#include "sim/base/error.hpp"

namespace bneck {

namespace {
// "file:" URI of a path, opened immutable: SQLite then never writes beside the input (no -wal or
// -shm files for a WAL-mode database) and takes no locks.
std::string immutable_uri(const std::string& path) {
  static const char* hex = "0123456789ABCDEF";
  std::string u = "file:";
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '/' || c == '.' || c == '-' || c == '_' || c == '~')
      u += static_cast<char>(c);
    else {
      u += '%';
      u += hex[c >> 4];
      u += hex[c & 15];
    }
  }
  return u + "?immutable=1";
}
}  // namespace

SqliteDb::SqliteDb(const std::string& path) : path_(path) {
  int rc = sqlite3_open_v2(immutable_uri(path).c_str(), &db_, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    db_ = nullptr;
    throw InputError(path, "cannot open as SQLite: " + msg);
  }
  sqlite3_extended_result_codes(db_, 1);
  try {
    // Tables only: a view is a query (a recursive one runs for ever), not data an export holds.
    SqliteStmt st(*this, "SELECT name FROM sqlite_master WHERE type = 'table'");
    while (st.step()) tables_.emplace(st.text(0));
  } catch (...) {  // not a database after all: the destructor will not run, close it here
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

SqliteDb::~SqliteDb() { sqlite3_close(db_); }

void SqliteDb::fail(const std::string& what) const { throw InputError(path_, what); }

std::set<std::string> SqliteDb::columns(const std::string& table) const {
  std::set<std::string> out;
  if (!has_table(table)) return out;
  SqliteStmt st(*this, "PRAGMA table_info(\"" + table + "\")");
  while (st.step()) out.emplace(st.text(1));
  return out;
}

SqliteStmt::SqliteStmt(const SqliteDb& db, const std::string& sql) : db_(db), sql_(sql) {
  int rc = sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &st_, nullptr);
  if (rc != SQLITE_OK)
    db.fail(std::string("not a readable trace database (") + sqlite3_errmsg(db.handle()) + ") in query: " + sql.substr(0, 120));
}

SqliteStmt::~SqliteStmt() { sqlite3_finalize(st_); }

bool SqliteStmt::step() {
  int rc = sqlite3_step(st_);
  if (rc == SQLITE_ROW) {
    ++rows_;
    return true;
  }
  if (rc == SQLITE_DONE) return false;
  db_.fail(std::string("read failed at record ") + std::to_string(rows_ + 1) + " (" + sqlite3_errmsg(db_.handle()) +
           ") in query: " + sql_.substr(0, 120));
}

std::string_view SqliteStmt::text(int col) const {
  const unsigned char* p = sqlite3_column_text(st_, col);
  if (!p) return {};
  return {reinterpret_cast<const char*>(p), static_cast<std::size_t>(sqlite3_column_bytes(st_, col))};
}

}  // namespace bneck
