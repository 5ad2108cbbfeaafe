// The one table of gRPC code names (common/grpc_code.h) that dexcli, the SDK
// and dex-web's gateway print: the numbers are gRPC's wire codes.
#include <gtest/gtest.h>

#include "common/grpc_code.h"

namespace dex {
namespace {

TEST(GrpcCodeName, EveryWireCodeHasItsNameAndOthersAreUnknown) {
  EXPECT_EQ(grpc_code_name(0), "OK");
  EXPECT_EQ(grpc_code_name(3), "INVALID_ARGUMENT");
  EXPECT_EQ(grpc_code_name(5), "NOT_FOUND");
  EXPECT_EQ(grpc_code_name(9), "FAILED_PRECONDITION");
  EXPECT_EQ(grpc_code_name(14), "UNAVAILABLE");
  EXPECT_EQ(grpc_code_name(16), "UNAUTHENTICATED");
  EXPECT_EQ(grpc_code_name(-1), "UNKNOWN");
  EXPECT_EQ(grpc_code_name(17), "UNKNOWN");
}

}  // namespace
}  // namespace dex
