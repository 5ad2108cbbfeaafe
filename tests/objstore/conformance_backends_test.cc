// Runs the conformance suite against every backend that exists so far.
#include <memory>

#include "common/clock.h"
#include "conformance.h"
#include "objstore/faulty_store.h"
#include "objstore/filesystem_store.h"
#include "objstore/memory_store.h"
#include "test_util.h"

namespace dex::objstore_test {
namespace {

std::unique_ptr<ObjectStore> make_filesystem(Durability durability) {
  auto dir = std::make_shared<TempDir>();
  auto store = FilesystemObjectStore::open(dir->path() / "objects", durability);
  if (!store.is_ok()) {
    ADD_FAILURE() << store.status().to_string();
    return nullptr;
  }
  return std::make_unique<OwningStore>(dir, std::move(store).value());
}

std::unique_ptr<ObjectStore> make_faulty_memory() {
  struct Resources {
    MemoryObjectStore inner;
    ManualClock clock;
  };
  auto resources = std::make_shared<Resources>();
  auto faulty = std::make_unique<FaultyObjectStore>(resources->inner, resources->clock,
                                                    /*seed=*/1, FaultPlan{});
  return std::make_unique<OwningStore>(resources, std::move(faulty));
}

DEX_INSTANTIATE_OBJECT_STORE_CONFORMANCE(Memory, ObjectStoreBackend{
                                                     "memory", [] {
                                                       return std::unique_ptr<ObjectStore>(
                                                           std::make_unique<MemoryObjectStore>());
                                                     }});
DEX_INSTANTIATE_OBJECT_STORE_CONFORMANCE(FilesystemStrict,
                                         ObjectStoreBackend{
                                             "strict",
                                             [] { return make_filesystem(Durability::kStrict); }});
DEX_INSTANTIATE_OBJECT_STORE_CONFORMANCE(FilesystemProcessCrashSafe,
                                         ObjectStoreBackend{"processCrashSafe", [] {
                                                              return make_filesystem(
                                                                  Durability::kProcessCrashSafe);
                                                            }});
DEX_INSTANTIATE_OBJECT_STORE_CONFORMANCE(FaultyNoFaults,
                                         ObjectStoreBackend{"memory",
                                                            [] { return make_faulty_memory(); }});

}  // namespace
}  // namespace dex::objstore_test
