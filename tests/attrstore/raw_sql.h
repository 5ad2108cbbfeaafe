// TEST TOOL: a plain connection to the test database (libpq or libmariadb,
// blocking, no dex code in the way) to set tables up, hold locks from a second
// session and read back what an AttributeTable wrote.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attrstore/store_settings.h"
#include "common/status.h"

namespace dex::attrstore::testing {

using Rows = std::vector<std::vector<std::optional<std::string>>>;

class RawSql {
 public:
  // Fails the test (and answers nullptr) if it cannot connect. Sessions use
  // UTC for timestamps.
  static std::unique_ptr<RawSql> connect(StoreType type, const std::string& dsn);
  virtual ~RawSql() = default;
  // One statement; the error's text if it fails.
  virtual Status run(const std::string& sql) = 0;
  virtual StatusOr<Rows> query(const std::string& sql) = 0;
  // run() that must succeed (a test failure otherwise).
  void exec(const std::string& sql);
  // The first column of the first row (nullopt: NULL or no row); must succeed.
  std::optional<std::string> scalar(const std::string& sql);
};

// The DSN of a test server from the environment that tests/support/sql_servers.py
// sets; fails the test when it is missing (the tests never skip).
std::string test_dsn(StoreType type);

}  // namespace dex::attrstore::testing
