#include "common/framing.h"

#include <gtest/gtest.h>

namespace dex {
namespace {

TEST(Framing, RoundTrips) {
  std::string framed = frame(kLeaseMagic, "hello");
  auto payload = unframe(kLeaseMagic, framed);
  ASSERT_TRUE(payload.is_ok()) << payload.status().to_string();
  EXPECT_EQ(payload.value(), "hello");
}

TEST(Framing, EmptyPayloadRoundTrips) {
  auto payload = unframe(kLogBatchMagic, frame(kLogBatchMagic, ""));
  ASSERT_TRUE(payload.is_ok());
  EXPECT_EQ(payload.value(), "");
}

TEST(Framing, TornObjectIsCorruption) {
  std::string framed = frame(kLeaseMagic, "hello world");
  for (size_t cut = 0; cut < framed.size(); ++cut) {
    auto payload = unframe(kLeaseMagic, std::string_view(framed).substr(0, cut));
    EXPECT_TRUE(payload.status().is_corruption()) << "cut at " << cut;
  }
}

TEST(Framing, EveryFlippedBitIsCorruption) {
  std::string framed = frame(kLeaseMagic, "payload bytes");
  for (size_t i = 0; i < framed.size() * 8; ++i) {
    std::string bad = framed;
    bad[i / 8] = static_cast<char>(bad[i / 8] ^ (1 << (i % 8)));
    EXPECT_TRUE(unframe(kLeaseMagic, bad).status().is_corruption()) << "bit " << i;
  }
}

TEST(Framing, WrongMagicIsCorruptionNamingIt) {
  auto payload = unframe(kLogBatchMagic, frame(kLeaseMagic, "x"));
  ASSERT_TRUE(payload.status().is_corruption());
  EXPECT_NE(payload.status().message().find("magic"), std::string::npos);
}

TEST(Framing, NewerVersionIsRefusedWithReason) {
  std::string framed = frame(kLeaseMagic, "x");
  framed[4] = 2;
  auto payload = unframe(kLeaseMagic, framed);
  ASSERT_TRUE(payload.status().is_corruption());
  EXPECT_NE(payload.status().message().find("version 2"), std::string::npos);
}

}  // namespace
}  // namespace dex
