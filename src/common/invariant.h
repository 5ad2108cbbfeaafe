// Invariants that stay checked in every build (TigerBeetle style): a broken
// one is a bug in dex, and continuing would write a wrong state durably.
#pragma once

namespace dex {

[[noreturn]] void invariant_failed(const char* condition, const char* message, const char* file,
                                   int line);

}  // namespace dex

#define DEX_INVARIANT(condition, message)                                               \
  do {                                                                                  \
    if (!(condition)) ::dex::invariant_failed(#condition, message, __FILE__, __LINE__); \
  } while (false)
