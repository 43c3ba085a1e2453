// TestDatabase: see TestDatabase.h.
#include "tests/support/TestDatabase.h"

#include <stdexcept>

#include <sqlite3.h>

namespace strata::test {

std::string execSql(const std::string& path, const std::string& sql) {
    sqlite3* db = nullptr;
    if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
        sqlite3_close(db);
        return "cannot open " + path;
    }
    sqlite3_busy_timeout(db, 10000);
    char* err = nullptr;
    std::string why;
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) why = err ? err : sqlite3_errmsg(db);
    sqlite3_free(err);
    sqlite3_close(db);
    return why;
}

int64_t queryInt(const std::string& path, const std::string& sql) {
    sqlite3* db = nullptr;
    int64_t value = -1;
    sqlite3_stmt* q = nullptr;
    if (sqlite3_open(path.c_str(), &db) == SQLITE_OK &&
        sqlite3_prepare_v2(db, sql.c_str(), -1, &q, nullptr) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW)
        value = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(db);
    return value;
}

WriteLock::WriteLock(const std::string& path) {
    if (sqlite3_open(path.c_str(), &m_db) != SQLITE_OK) {
        sqlite3_close(m_db);
        throw std::runtime_error("cannot open " + path);
    }
    sqlite3_busy_timeout(m_db, 10000);
    char* err = nullptr;
    if (sqlite3_exec(m_db, "BEGIN EXCLUSIVE", nullptr, nullptr, &err) != SQLITE_OK) {
        const std::string why = err ? err : "?";
        sqlite3_free(err);
        sqlite3_close(m_db);
        m_db = nullptr;
        throw std::runtime_error("BEGIN EXCLUSIVE: " + why);
    }
}

WriteLock::~WriteLock() { release(); }

void WriteLock::release() {
    if (!m_db) return;
    sqlite3_exec(m_db, "COMMIT", nullptr, nullptr, nullptr);
    sqlite3_close(m_db);
    m_db = nullptr;
}

}  // namespace strata::test
