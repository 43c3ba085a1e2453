// SQLite helpers for the run history's tests, on SQLite's C API (the tests' own connection, as another program
// would open the database): a statement run as is, and a connection that holds the write lock.
#pragma once

#include <cstdint>
#include <string>

struct sqlite3;

namespace strata::test {

// Runs `sql` (one or more statements) on the database at `path`; returns an empty string, or the error.
std::string execSql(const std::string& path, const std::string& sql);
// The first column of the first row `sql` returns, as an integer; -1 when there is none or on error.
int64_t queryInt(const std::string& path, const std::string& sql);

// A second connection that holds the database's write lock (BEGIN EXCLUSIVE) until released, as another
// program (a backup, an sqlite3 shell with an open transaction) would. Throws when it cannot take the lock.
class WriteLock {
public:
    explicit WriteLock(const std::string& path);
    ~WriteLock();
    WriteLock(const WriteLock&) = delete;
    WriteLock& operator=(const WriteLock&) = delete;
    void release();

private:
    sqlite3* m_db = nullptr;
};

}  // namespace strata::test
