// Writes the seed corpus of every fuzz target (corpus_seeds.cc) under DIR:
//   fuzz_make_corpus tests/fuzz/corpus
// One file per seed, DIR/<target>/<name>; existing files of the same name are
// replaced, others are left alone.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "corpus_seeds.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR (tests/fuzz/corpus)\n", argv[0]);
    return 2;
  }
  const std::filesystem::path root(argv[1]);
  size_t written = 0, bytes = 0;
  for (const auto& seed : dex::fuzz::corpus_seeds()) {
    const auto dir = root / seed.target;
    std::filesystem::create_directories(dir);
    std::ofstream out(dir / seed.name, std::ios::binary | std::ios::trunc);
    out.write(seed.bytes.data(), static_cast<std::streamsize>(seed.bytes.size()));
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", (dir / seed.name).c_str());
      return 1;
    }
    ++written;
    bytes += seed.bytes.size();
  }
  std::printf("%zu seeds, %zu bytes, under %s\n", written, bytes, root.c_str());
  return 0;
}
