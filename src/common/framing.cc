#include "common/framing.h"

#include <zlib.h>

#include <fmt/format.h>

namespace dex {
namespace {

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint32_t get_u32(std::string_view in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(in[i])) << (8 * i);
  return v;
}

uint32_t crc_of(uint8_t version, uint32_t length, std::string_view payload) {
  std::string head;
  head.push_back(static_cast<char>(version));
  put_u32(head, length);
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, reinterpret_cast<const Bytef*>(head.data()), static_cast<uInt>(head.size()));
  crc = crc32_z(crc, reinterpret_cast<const Bytef*>(payload.data()), payload.size());
  return static_cast<uint32_t>(crc);
}

}  // namespace

std::string frame(std::string_view magic, std::string_view payload) {
  assert(magic.size() == 4);
  assert(payload.size() <= kFramePayloadBytesMax);
  std::string out;
  out.reserve(kFrameHeaderBytes + payload.size());
  out.append(magic);
  out.push_back(static_cast<char>(kFrameVersion));
  auto length = static_cast<uint32_t>(payload.size());
  put_u32(out, length);
  put_u32(out, crc_of(kFrameVersion, length, payload));
  out.append(payload);
  return out;
}

StatusOr<std::string_view> unframe(std::string_view magic, std::string_view bytes) {
  if (bytes.size() < kFrameHeaderBytes) {
    return Status::corruption(fmt::format("object too short: {} bytes, a header needs {}",
                                          bytes.size(), kFrameHeaderBytes));
  }
  if (bytes.substr(0, 4) != magic) {
    return Status::corruption(fmt::format("bad magic: expected {}", magic));
  }
  auto version = static_cast<uint8_t>(bytes[4]);
  if (version != kFrameVersion) {
    return Status::corruption(
        fmt::format("unsupported format version {} (this build reads {})", version, kFrameVersion));
  }
  uint32_t length = get_u32(bytes.substr(5, 4));
  uint32_t crc = get_u32(bytes.substr(9, 4));
  if (bytes.size() - kFrameHeaderBytes != length) {
    return Status::corruption(
        fmt::format("length mismatch: header says {} payload bytes, object has {}", length,
                    bytes.size() - kFrameHeaderBytes));
  }
  std::string_view payload = bytes.substr(kFrameHeaderBytes);
  if (crc_of(version, length, payload) != crc) {
    return Status::corruption(fmt::format("CRC mismatch over {} payload bytes", length));
  }
  return payload;
}

}  // namespace dex
