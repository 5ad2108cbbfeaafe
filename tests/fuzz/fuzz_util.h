// Shared pieces of the fuzz targets (README.md here).
//
// Every target is a plain function `int <name>(const uint8_t*, size_t)` in
// namespace dex::fuzz (fuzz_targets.h). The clang build (DEX_FUZZ=ON) compiles
// each target alone with DEX_FUZZ_LIBFUZZER defined, and DEX_FUZZ_ENTRY turns the
// function into libFuzzer's entry point; the normal build links all of them into
// the replay test, which feeds them the committed corpus and regressions.
//
// An invariant that does not hold aborts (FUZZ_CHECK): libFuzzer then saves the
// input as a crash, and the replay test dies on it. Expected failures of a
// decoder are Status values, never exceptions or aborts.
#pragma once

#include <fmt/format.h>
#include <google/protobuf/stubs/logging.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#ifdef DEX_FUZZ_LIBFUZZER
#define DEX_FUZZ_ENTRY(fn)                                                \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { \
    return ::dex::fuzz::fn(data, size);                                   \
  }
#else
#define DEX_FUZZ_ENTRY(fn)
#endif

#define FUZZ_CHECK(cond, ...)                                                          \
  do {                                                                                 \
    if (!(cond)) ::dex::fuzz::fail(__FILE__, __LINE__, #cond, fmt::format(__VA_ARGS__)); \
  } while (0)

namespace dex::fuzz {

[[noreturn]] inline void fail(const char* file, int line, const char* cond,
                              const std::string& why) {
  std::fprintf(stderr, "%s:%d: fuzz invariant failed: %s: %s\n", file, line, cond, why.c_str());
  std::fflush(stderr);
  std::abort();
}

// Declared at the top of a target: protobuf logs every parse of a string field
// that is not UTF-8, which would drown the fuzzer's output.
using ProtobufQuiet = google::protobuf::LogSilencer;

inline std::string_view as_view(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// The layout of the binary targets' inputs:
//
//   mode byte | [key line '\n'] | body
//
// Mode bit 0 set: the body is the whole object as stored (the frame and its CRC
// included), which exercises the frame checks. Clear: the body is the payload,
// and the target frames it with the right magic and CRC first, so that mutations
// reach the protobuf parser and the checks behind it instead of dying at the CRC.
struct BinaryInput {
  bool raw = false;
  uint8_t mode = 0;
  std::string_view key;  // empty when the target reads no key line
  std::string_view body;
};

inline BinaryInput split_input(const uint8_t* data, size_t size, bool with_key) {
  BinaryInput in;
  std::string_view rest = as_view(data, size);
  if (!rest.empty()) {
    in.mode = static_cast<uint8_t>(rest.front());
    in.raw = (in.mode & 1) != 0;
    rest.remove_prefix(1);
  }
  if (with_key) {
    const size_t nl = rest.find('\n');
    in.key = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
  }
  in.body = rest;
  return in;
}

// The inverse of split_input, for the corpus generator.
inline std::string join_input(bool raw, std::string_view key, bool with_key,
                              std::string_view body) {
  std::string out(1, raw ? '\x01' : '\x00');
  if (with_key) {
    out.append(key);
    out.push_back('\n');
  }
  out.append(body);
  return out;
}

}  // namespace dex::fuzz
