// Small helpers shared by the unit tests of every module (instead of a copy in each).
// Thread-safety: RandomBytes is pure; a TempDir belongs to one test.
#ifndef CAIRN_TESTING_TEST_UTIL_H_
#define CAIRN_TESTING_TEST_UTIL_H_

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

#include "ufs/ufs.h"

namespace cairn::testing {

// `n` pseudo-random bytes, the same for the same seed.
std::string RandomBytes(size_t n, uint64_t seed);

// The value of the unlabelled series `name` in a Prometheus text exposition
// (metrics::Registry::ExposeText()); -1 when it is not there.
double MetricValue(std::string_view exposition, std::string_view name);

// The whole current content of `key` in `store`, or "<error>" naming why it cannot be read (a
// test compares it with what it expects, so a missing object fails with a readable message).
std::string ObjectContent(ufs::UnderStorage& store, const std::string& key);

// Polls `condition` every few milliseconds until it holds (true) or `timeout` passes (false):
// for state another thread updates after the event a test observes (a server's counters after
// the client saw its refusal). Not a timing assertion: the bound is generous.
bool WaitUntil(const std::function<bool()>& condition,
               std::chrono::milliseconds timeout = std::chrono::seconds(10));

// Flips one bit of the data of the one page file under the cache folder `dir` (page files are
// named by 32 hex digits; the byte 100 from the end of the file, in the data's last chunk).
// False if `dir` holds no page file or it cannot be changed.
bool FlipByteOfPageFile(const std::filesystem::path& dir);
// Changes the byte at `offset` of the file at `path` in place, as a failing disk would. False if
// the file has no such byte or cannot be changed.
bool FlipByteAt(const std::filesystem::path& path, uint64_t offset);

// While it lives, a write of any file of this process past `bytes` fails with EFBIG (a disk
// failing, or full, for a file of that size: the write-back journal, in a test whose other
// files are larger or written before). Not nested; restores the limit it found.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(uint64_t bytes);
  ~FileSizeLimit();
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  uint64_t soft_ = 0;
  void (*previous_handler_)(int) = nullptr;  // SIGXFSZ's, restored.
};

// A fresh, empty folder under the system temp folder named after the running test and the
// process, removed with everything in it when the object goes.
class TempDir {
 public:
  explicit TempDir(std::string_view tag = "t");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace cairn::testing

#endif  // CAIRN_TESTING_TEST_UTIL_H_
