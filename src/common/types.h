// Strong types for identifiers, so that an epoch cannot be passed as a slot
// (Redpanda's model/fundamental.h).
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <string>

namespace dex {

template <typename Tag>
struct StrongU64 {
  uint64_t value = 0;
  constexpr StrongU64() = default;
  constexpr explicit StrongU64(uint64_t v) : value(v) {}
  constexpr auto operator<=>(const StrongU64&) const = default;
  constexpr StrongU64 next() const { return StrongU64(value + 1); }
  std::string to_string() const { return std::to_string(value); }
};

struct EpochTag {};
struct SlotTag {};
// Raised by one at every lease acquisition; fences older holders.
using Epoch = StrongU64<EpochTag>;
// Position of a batch object in a node's log.
using Slot = StrongU64<SlotTag>;

template <typename Tag>
struct StrongString {
  std::string value;
  StrongString() = default;
  explicit StrongString(std::string v) : value(std::move(v)) {}
  auto operator<=>(const StrongString&) const = default;
  bool empty() const { return value.empty(); }
};

struct NodeIdTag {};
struct ProcessIdTag {};
using NodeId = StrongString<NodeIdTag>;
// Unique per process start: hostname, pid and random bits.
using ProcessId = StrongString<ProcessIdTag>;

}  // namespace dex
