// Helpers shared by the write benchmarks (write_bench, continue_bench): a cheap, reproducible
// content per run and position, and the read-back that checks an uploaded object against it.
#ifndef CAIRN_BENCH_BENCH_BYTES_H_
#define CAIRN_BENCH_BENCH_BYTES_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "ufs/ufs.h"

namespace cairn::bench {

using Clock = std::chrono::steady_clock;

inline double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Byte i of run r's object: cheap, and different per run and per position.
inline char ByteAt(uint64_t i, int run) {
  return static_cast<char>((i * 2654435761u >> 13) + static_cast<uint64_t>(run) * 7 + i / 4099);
}

// Fills `buf` with the bytes of run `run` from `offset`.
inline void Fill(std::vector<char>& buf, uint64_t offset, int run) {
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = ByteAt(offset + i, run);
}

// Checks that `key` holds exactly `size` bytes of run `run` (Corruption naming where not).
inline Status Verify(ufs::UnderStorage& ufs, const std::string& key, uint64_t size, int run) {
  CAIRN_ASSIGN_OR_RETURN(ufs::ObjectInfo info, ufs.Stat(key));
  if (info.size != size) return CorruptionError("size " + std::to_string(info.size));
  std::vector<char> got(8 << 20), want(8 << 20);
  for (uint64_t off = 0; off < size; off += got.size()) {
    got.resize(std::min<uint64_t>(got.size(), size - off));
    want.resize(got.size());
    CAIRN_ASSIGN_OR_RETURN(size_t n, ufs.Read(key, info.version, off, got));
    Fill(want, off, run);
    if (n != got.size() || got != want) {
      return CorruptionError(key + ": wrong bytes near offset " + std::to_string(off));
    }
  }
  return Status::Ok();
}

}  // namespace cairn::bench

#endif  // CAIRN_BENCH_BENCH_BYTES_H_
