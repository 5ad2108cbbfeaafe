#include "common/random.h"

#include <unistd.h>

#include <fmt/format.h>

namespace dex {

std::string random_hex_id() {
  static thread_local std::random_device device;
  static thread_local std::mt19937_64 engine((static_cast<uint64_t>(device()) << 32) ^ device() ^
                                             static_cast<uint64_t>(getpid()));
  return fmt::format("{:016x}{:016x}", engine(), engine());
}

std::string make_process_id() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return fmt::format("{}-{}-{}", host[0] ? host : "unknown", getpid(),
                     random_hex_id().substr(0, 8));
}

}  // namespace dex
