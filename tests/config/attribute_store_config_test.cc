// attributeStore.* (docs/attribute-store.md, "Configuration"): every subcommand
// reads the stores the same way; each refusal names the key; a DSN is never
// shown, whether it came inline, from a file or from the environment.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "config/config.h"

namespace dex {
namespace {

constexpr const char* kServe =
    "nodeId: node-a\nobjectStore:\n  type: s3\n  bucket: b\n  endpoint: http://127.0.0.1:9000\n"
    "localStore:\n  path: /var/lib/dex\n";
constexpr const char* kSecret = "postgres://dex:hunter2-secret@db:5432/app";

StatusOr<NodeSettings> serve(const std::string& more) {
  return load_serve_config_yaml(std::string(kServe) + more, "serve.yaml");
}

TEST(AttributeStoreConfig, StoresAndTheirSettingsAreRead) {
  auto c = serve(
      "attributeStore:\n  stores:\n    reporting:\n      type: postgres\n      dsn: " +
      std::string(kSecret) +
      "\n      tableName: public.orders\n      deleteRows: true\n    ops:\n      type: mysql\n"
      "      dsn: mysql://root@db:3306/ops\n      tableName: ops.flows\n"
      "  schemaSyncInterval: 30s\n  syncBatchSize: 250\n  syncAttemptTimeout: 5s\n"
      "  syncRetryPolicy:\n    initialInterval: 50ms\n    maximumInterval: 10s\n"
      "    backoffCoefficient: 1.5\n  createWatermarkTable: false\n");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  const auto& a = c->attribute_store;
  ASSERT_EQ(a.stores.size(), 2u);
  EXPECT_EQ(a.stores[0].name, "reporting");
  EXPECT_EQ(a.stores[0].type, attrstore::StoreType::kPostgres);
  EXPECT_EQ(a.stores[0].dsn, kSecret);
  EXPECT_EQ(a.stores[0].table_name, "public.orders");
  EXPECT_TRUE(a.stores[0].delete_rows);
  EXPECT_EQ(a.stores[1].name, "ops");
  EXPECT_EQ(a.stores[1].type, attrstore::StoreType::kMysql);
  EXPECT_FALSE(a.stores[1].delete_rows);
  EXPECT_EQ(a.schema_sync_interval, seconds(30));
  EXPECT_EQ(a.sync_batch_size, 250u);
  EXPECT_EQ(a.sync_attempt_timeout, seconds(5));
  EXPECT_EQ(a.sync_retry_policy.initial_interval, milliseconds(50));
  EXPECT_EQ(a.sync_retry_policy.maximum_interval, seconds(10));
  EXPECT_DOUBLE_EQ(a.sync_retry_policy.backoff_coefficient, 1.5);
  EXPECT_FALSE(a.create_watermark_table);
}

TEST(AttributeStoreConfig, TheDefaultsAreTheDocumentedOnes) {
  auto c = serve("");
  ASSERT_TRUE(c.is_ok());
  const auto& a = c->attribute_store;
  EXPECT_TRUE(a.stores.empty());
  EXPECT_EQ(a.schema_sync_interval, std::chrono::minutes(1));
  EXPECT_EQ(a.sync_batch_size, 100u);
  EXPECT_EQ(a.sync_attempt_timeout, seconds(30));
  EXPECT_EQ(a.sync_retry_policy.initial_interval, milliseconds(100));
  EXPECT_EQ(a.sync_retry_policy.maximum_interval, seconds(30));
  EXPECT_DOUBLE_EQ(a.sync_retry_policy.backoff_coefficient, 2.0);
  EXPECT_TRUE(a.create_watermark_table);
}

TEST(AttributeStoreConfig, EveryRefusalNamesTheKeyAndNeverTheDsn) {
  const std::string store = "attributeStore:\n  stores:\n    r:\n";
  const std::string ok = "      type: postgres\n      tableName: t\n";
  const std::string dsn = "      dsn: " + std::string(kSecret) + "\n";
  struct Case {
    std::string yaml, needle;
  };
  const std::vector<Case> cases = {
      {store + ok, "attributeStore.stores.r needs exactly one of dsn, dsnFile and dsnEnv"},
      {store + ok + dsn + "      dsnEnv: X\n", "needs exactly one of dsn, dsnFile and dsnEnv"},
      {store + "      tableName: t\n" + dsn, "'attributeStore.stores.r.type' is required"},
      {store + "      type: oracle\n      tableName: t\n" + dsn,
       "attributeStore.stores.r.type must be postgres or mysql, not 'oracle'"},
      {store + "      type: postgres\n" + dsn, "'attributeStore.stores.r.tableName' is required"},
      {store + ok + dsn + "      tabelName: x\n",
       "unknown key 'attributeStore.stores.r.tabelName'"},
      {store + ok + dsn + "      deleteRows: yes\n",
       "attributeStore.stores.r.deleteRows must be true or false"},
      {"attributeStore:\n  stores:\n    \"bad name\":\n" + ok + dsn,
       "'bad name' is not a store name"},
      {"attributeStore:\n  stores: [a]\n", "'attributeStore.stores' must be a mapping of names"},
      {store + ok + "      dsnFile: /nonexistent/dsn\n",
       "attributeStore.stores.r.dsnFile: '/nonexistent/dsn' is not a readable file"},
      {store + ok + "      dsnEnv: DEX_TEST_SURELY_UNSET_VAR\n",
       "the environment variable DEX_TEST_SURELY_UNSET_VAR is not set"},
      {store + ok + "      dsn: \"(not shown)\"\n", "the placeholder that serve --check prints"},
      {"attributeStore:\n  syncRetryPolicy:\n    maximumAttempts: 5\n",
       "attributeStore.syncRetryPolicy.maximumAttempts: dex never gives up on a batch"},
      {"attributeStore:\n  syncRetryPolicy:\n    totalDuration: 1h\n",
       "syncRetryPolicy.totalDuration: dex never gives up"},
      {"attributeStore:\n  syncRetryPolicy:\n    initialInterval: 1m\n    maximumInterval: 1s\n",
       "maximumInterval must be at least its initialInterval"},
      {"attributeStore:\n  syncRetryPolicy:\n    backoffCoefficient: 0.5\n",
       "backoffCoefficient must be a number from 1 to 100, not '0.5'"},
      {"attributeStore:\n  syncBatchSize: 0\n",
       "attributeStore.syncBatchSize must be a whole number from 1 to 10000, not '0'"},
      {"attributeStore:\n  schemaSyncInterval: soon\n", "attributeStore.schemaSyncInterval"},
      {"attributeStore:\n  createWatermarkTable: maybe\n",
       "attributeStore.createWatermarkTable must be true or false"},
      {"attributeStore:\n  storez: {}\n", "unknown key 'attributeStore.storez'"},
  };
  for (const auto& c : cases) {
    auto r = serve(c.yaml);
    ASSERT_FALSE(r.is_ok()) << c.yaml;
    EXPECT_NE(r.status().message().find(c.needle), std::string::npos)
        << r.status().message() << "\nwanted: " << c.needle;
    EXPECT_EQ(r.status().message().find("hunter2"), std::string::npos) << r.status().message();
    // dev reads the same keys the same way.
    NodeSettings dev = NodeSettings::defaults(Subcommand::kDev);
    EXPECT_FALSE(apply_dev_override_yaml(c.yaml, "dev.yaml", dev).is_ok()) << c.yaml;
  }
}

TEST(AttributeStoreConfig, ADsnFromAFileOrTheEnvironmentIsReadAndDescribedByItsSourceOnly) {
  const auto file =
      std::filesystem::temp_directory_path() / ("dex-config-dsn-" + std::to_string(::getpid()));
  std::ofstream(file) << kSecret << "\n";
  ::setenv("DEX_TEST_ORDERS_DSN", "mysql://u:env-secret@db/app", 1);
  auto c =
      serve("attributeStore:\n  stores:\n    fromfile:\n      type: postgres\n      dsnFile: " +
            file.string() +
            "\n      tableName: orders\n    fromenv:\n      type: mysql\n      dsnEnv: "
            "DEX_TEST_ORDERS_DSN\n      tableName: orders\n    inline:\n      type: postgres\n"
            "      dsn: " +
            kSecret + "\n      tableName: \"weird \\\"name\\\"\"\n");
  std::filesystem::remove(file);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  const auto& stores = c->attribute_store.stores;
  ASSERT_EQ(stores.size(), 3u);
  EXPECT_EQ(stores[0].dsn, kSecret) << "the file's trailing newline is dropped";
  EXPECT_EQ(stores[1].dsn, "mysql://u:env-secret@db/app");
  const std::string described = describe_serve_config(c.value());
  EXPECT_EQ(described.find("hunter2"), std::string::npos) << described;
  EXPECT_EQ(described.find("env-secret"), std::string::npos) << described;
  EXPECT_NE(described.find("dsnFile: \"" + file.string() + "\""), std::string::npos) << described;
  EXPECT_NE(described.find("dsnEnv: \"DEX_TEST_ORDERS_DSN\""), std::string::npos) << described;
  // Read back: the file is gone and the inline DSN is a placeholder, so the
  // copy is refused rather than run without its DSN.
  auto again = load_serve_config_yaml(described, "check-output.yaml");
  ASSERT_FALSE(again.is_ok());
  std::ofstream(file) << kSecret << "\n";
  again = load_serve_config_yaml(described, "check-output.yaml");
  std::filesystem::remove(file);
  ASSERT_FALSE(again.is_ok());
  EXPECT_NE(again.status().message().find("placeholder"), std::string::npos)
      << again.status().message();
  ::unsetenv("DEX_TEST_ORDERS_DSN");
}

}  // namespace
}  // namespace dex
