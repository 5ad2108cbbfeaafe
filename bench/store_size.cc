// dex-store-size: the bytes of a stopped server's local store (RocksDB) before
// and after a full compaction, for bench/scale_bench.py's "bytes per closed
// run" row (issue 30). The store is compacted in place: use it on a copy or a
// scratch store only.
//
//   build/bin/dex-store-size --path DATA/local
// prints one line:  sst_bytes_before N sst_bytes_after M files_after F
#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>

namespace {

uint64_t sst_bytes(rocksdb::DB& db) {
  std::vector<rocksdb::LiveFileMetaData> files;
  db.GetLiveFilesMetaData(&files);
  uint64_t total = 0;
  for (const auto& f : files) total += f.size;
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Compacts a stopped dex local store and prints its SST bytes before and after"};
  std::string path;
  app.add_option("--path", path, "the local store directory")->required();
  CLI11_PARSE(app, argc, argv);

  rocksdb::Options options;
  rocksdb::DB* raw = nullptr;
  auto s = rocksdb::DB::Open(options, path, &raw);
  if (!s.ok()) {
    std::fprintf(stderr, "dex-store-size: cannot open %s: %s\n", path.c_str(),
                 s.ToString().c_str());
    return 1;
  }
  std::unique_ptr<rocksdb::DB> db(raw);
  // The memtable first, so that "before" counts every live byte as SST.
  if (s = db->Flush(rocksdb::FlushOptions()); !s.ok()) {
    std::fprintf(stderr, "dex-store-size: flush: %s\n", s.ToString().c_str());
    return 1;
  }
  const uint64_t before = sst_bytes(*db);
  rocksdb::CompactRangeOptions co;
  co.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
  if (s = db->CompactRange(co, nullptr, nullptr); !s.ok()) {
    std::fprintf(stderr, "dex-store-size: compaction: %s\n", s.ToString().c_str());
    return 1;
  }
  std::vector<rocksdb::LiveFileMetaData> files;
  db->GetLiveFilesMetaData(&files);
  fmt::print("sst_bytes_before {} sst_bytes_after {} files_after {}\n", before, sst_bytes(*db),
             files.size());
  return 0;
}
