// The conformance suite every ObjectStore backend must pass: S3 semantics as
// object_store.h states them. A backend instantiates it once with a factory
// that returns a fresh, empty store per test:
//
//   DEX_INSTANTIATE_OBJECT_STORE_CONFORMANCE(Memory, ObjectStoreBackend{"memory", [] {
//     return std::make_unique<MemoryObjectStore>();
//   }});
//
// Link the test binary with the dex_objstore_conformance object library.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include "objstore/object_store.h"

namespace dex::objstore_test {

struct ObjectStoreBackend {
  std::string name;  // the test-name suffix: letters, digits and '_' only
  std::function<std::unique_ptr<ObjectStore>()> make;  // a fresh, empty store per call
};

class ObjectStoreConformance : public ::testing::TestWithParam<ObjectStoreBackend> {
 protected:
  void SetUp() override;
  void TearDown() override { store_.reset(); }
  ObjectStore& store() { return *store_; }

 private:
  std::unique_ptr<ObjectStore> store_;
};

// Names the backend in test output (and in ctest names) instead of dumping bytes.
inline void PrintTo(const ObjectStoreBackend& backend, std::ostream* os) { *os << backend.name; }

std::string backend_test_name(const ::testing::TestParamInfo<ObjectStoreBackend>& info);

}  // namespace dex::objstore_test

// Use at namespace scope. gtest wants the fixture's unqualified name, hence the using.
#define DEX_INSTANTIATE_OBJECT_STORE_CONFORMANCE(instance, ...)                              \
  using ::dex::objstore_test::ObjectStoreConformance;                                        \
  INSTANTIATE_TEST_SUITE_P(instance, ObjectStoreConformance, ::testing::Values(__VA_ARGS__), \
                           ::dex::objstore_test::backend_test_name)
