#include "common/status.h"

#include <gtest/gtest.h>

#include "common/durability.h"

namespace dex {
namespace {

TEST(Status, CategoriesAreDistinct) {
  EXPECT_TRUE(Status::ok().is_ok());
  EXPECT_TRUE(Status::fenced("x").is_fenced());
  EXPECT_FALSE(Status::fenced("x").is_precondition_failed());
  EXPECT_TRUE(Status::corruption("x").is_corruption());
  EXPECT_EQ(Status::transient("reset").to_string(), "Transient: reset");
}

TEST(StatusOr, CarriesValueOrError) {
  StatusOr<int> v = 7;
  ASSERT_TRUE(v.is_ok());
  EXPECT_EQ(v.value(), 7);
  StatusOr<int> e = Status::not_found("gone");
  EXPECT_TRUE(e.status().is_not_found());
}

TEST(Durability, ParsesExactlyTheSpecNames) {
  EXPECT_EQ(parse_durability("strict"), Durability::kStrict);
  EXPECT_EQ(parse_durability("processCrashSafe"), Durability::kProcessCrashSafe);
  EXPECT_EQ(parse_durability("relaxed"), Durability::kRelaxed);
  EXPECT_EQ(parse_durability("Strict"), std::nullopt);
  EXPECT_EQ(parse_durability(""), std::nullopt);
}

}  // namespace
}  // namespace dex
