// The seed inputs of every fuzz target, made with the real encoders (binary
// formats) or written out here (text formats), plus hand-made edge cases.
// fuzz_make_corpus writes them to tests/fuzz/corpus/<target>/; the replay test
// also runs them straight from here, so a seed can never drift from the
// encoders unnoticed.
#pragma once

#include <string>
#include <vector>

namespace dex::fuzz {

struct Seed {
  std::string target;  // "log_batch", ... (the corpus folder)
  std::string name;    // file name in that folder
  std::string bytes;
};

std::vector<Seed> corpus_seeds();

}  // namespace dex::fuzz
