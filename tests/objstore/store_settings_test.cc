// open_object_store (objstore/store_settings.h): the one way every program
// opens the store its settings name, read-write for the servers and read-only
// for dexcli inspect.
#include "objstore/store_settings.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "objstore/filesystem_store.h"

namespace dex {
namespace {

namespace fs = std::filesystem;

class StoreSettingsTest : public ::testing::Test {
 protected:
  StoreSettingsTest()
      : dir_(fs::temp_directory_path() /
             ("dex-store-settings-" + std::to_string(::getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~StoreSettingsTest() override { fs::remove_all(dir_); }

  ObjectStoreSettings filesystem(const fs::path& path) const {
    ObjectStoreSettings s;
    s.type = ObjectStoreType::kFilesystem;
    s.path = path;
    return s;
  }

  fs::path dir_;
};

TEST_F(StoreSettingsTest, ReadWriteCreatesTheDirectoryWithTheGivenDurability) {
  ObjectStoreSettings s = filesystem(dir_ / "objects");
  s.durability = Durability::kStrict;
  auto store = open_object_store(s);
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  EXPECT_TRUE(fs::is_directory(dir_ / "objects"));
  auto* files = dynamic_cast<FilesystemObjectStore*>(store.value().get());
  ASSERT_NE(files, nullptr);
  EXPECT_EQ(files->durability(), Durability::kStrict);
  EXPECT_TRUE(store.value()->put("a", "1", PutCondition::create()).is_ok());
}

TEST_F(StoreSettingsTest, ReadOnlyCreatesNothingAndSkipsFsync) {
  auto missing = open_object_store(filesystem(dir_ / "none"), StoreAccess::kReadOnly);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_TRUE(missing.status().is_not_found()) << missing.status().to_string();
  EXPECT_NE(missing.status().message().find("no object store at " + (dir_ / "none").string()),
            std::string::npos)
      << missing.status().message();
  EXPECT_FALSE(fs::exists(dir_ / "none"));

  ASSERT_TRUE(open_object_store(filesystem(dir_ / "objects")).is_ok());  // a server made it
  ObjectStoreSettings s = filesystem(dir_ / "objects");
  s.durability = Durability::kStrict;
  auto store = open_object_store(s, StoreAccess::kReadOnly);
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  auto* files = dynamic_cast<FilesystemObjectStore*>(store.value().get());
  ASSERT_NE(files, nullptr);
  EXPECT_EQ(files->durability(), Durability::kProcessCrashSafe);
}

TEST_F(StoreSettingsTest, S3SettingsAreValidatedWithoutARequestAndNamedInErrors) {
  ObjectStoreSettings s;
  s.type = ObjectStoreType::kS3;
  s.bucket = "Not_A_Bucket";
  s.endpoint = "http://127.0.0.1:1";
  s.credentials_file = (dir_ / "no-credentials").string();
  auto no_credentials = open_object_store(s);
  ASSERT_FALSE(no_credentials.is_ok());
  EXPECT_TRUE(no_credentials.status().message().starts_with("S3 credentials"))
      << no_credentials.status().message();

  std::ofstream(dir_ / "credentials")
      << "[default]\naws_access_key_id = AKID\naws_secret_access_key = secret\n";
  s.credentials_file = (dir_ / "credentials").string();
  auto bad_bucket = open_object_store(s);
  ASSERT_FALSE(bad_bucket.is_ok());
  EXPECT_TRUE(bad_bucket.status().message().starts_with("S3 bucket"))
      << bad_bucket.status().message();

  s.bucket = "dex-bucket";
  s.addressing = S3Addressing::kVirtualHost;
  auto options = s3_options(s);
  ASSERT_TRUE(options.is_ok()) << options.status().to_string();
  EXPECT_EQ(options->bucket, "dex-bucket");
  EXPECT_EQ(options->addressing, S3Addressing::kVirtualHost);
  EXPECT_EQ(options->credentials.access_key_id, "AKID");
  EXPECT_TRUE(open_object_store(s).is_ok());  // no server listens there: nothing was sent
}

TEST(StoreSettingsNames, ParseTheirOwnNamesAndNothingElse) {
  for (ObjectStoreType t : {ObjectStoreType::kS3, ObjectStoreType::kFilesystem}) {
    EXPECT_EQ(parse_object_store_type(object_store_type_name(t)), t);
  }
  for (S3Addressing a : {S3Addressing::kPath, S3Addressing::kVirtualHost}) {
    EXPECT_EQ(parse_s3_addressing(s3_addressing_name(a)), a);
  }
  EXPECT_EQ(object_store_type_name(ObjectStoreType::kS3), "s3");
  EXPECT_EQ(s3_addressing_name(S3Addressing::kVirtualHost), "virtualHost");
  for (const char* bad : {"", "S3", "gcs", "filesystem ", "virtualhost", "dns"}) {
    EXPECT_FALSE(parse_object_store_type(bad).has_value()) << bad;
    EXPECT_FALSE(parse_s3_addressing(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace dex
