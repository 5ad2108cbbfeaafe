// Framing for every object dex persists (LevelDB's log_format.h): a reader can
// tell a dex object from junk, a newer format from an older one, and a torn or
// bit-flipped object from a good one.
//
//   magic (4 bytes, says what the object is) | version (1) | payload length (4, LE)
//   | CRC-32 of version+length+payload (4, LE) | payload (protobuf)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace dex {

inline constexpr std::string_view kLeaseMagic = "DXLS";
inline constexpr std::string_view kLogBatchMagic = "DXLB";
inline constexpr std::string_view kSnapshotManifestMagic = "DXSM";
inline constexpr std::string_view kLogStartMagic = "DXGC";
inline constexpr uint8_t kFrameVersion = 1;
inline constexpr size_t kFrameHeaderBytes = 13;
inline constexpr uint32_t kFramePayloadBytesMax = 256u << 20;

std::string frame(std::string_view magic, std::string_view payload);
// Returns the payload, or Corruption with a reason and the byte counts.
StatusOr<std::string_view> unframe(std::string_view magic, std::string_view bytes);

}  // namespace dex
