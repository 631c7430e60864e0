#include "testing/test_util.h"

#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>

namespace cairn::testing {

double MetricValue(std::string_view exposition, std::string_view name) {
  const std::string needle = "\n" + std::string(name) + " ";
  const size_t at = exposition.find(needle);
  if (at == std::string_view::npos) return -1;
  return std::stod(std::string(exposition.substr(at + needle.size())));
}

std::string ObjectContent(ufs::UnderStorage& store, const std::string& key) {
  StatusOr<ufs::ObjectInfo> info = store.Stat(key);
  if (!info.ok()) return "<" + info.status().ToString() + ">";
  std::string out(info->size, '\0');
  StatusOr<size_t> n = store.Read(key, info->version, 0, std::span<char>(out.data(), out.size()));
  if (!n.ok()) return "<" + n.status().ToString() + ">";
  out.resize(*n);
  return out;
}

std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v = rng();
    std::memcpy(s.data() + i, &v, 8);
  }
  for (; i < n; ++i) s[i] = static_cast<char>(rng());
  return s;
}

bool WaitUntil(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

TempDir::TempDir(std::string_view tag) {
  static std::atomic<int> counter{0};
  std::string name = "cairn-" + std::string(tag) + "-" + std::to_string(::getpid()) + "-" +
                     std::to_string(counter.fetch_add(1));
  path_ = std::filesystem::temp_directory_path() / name;
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

bool FlipByteOfPageFile(const std::filesystem::path& dir) {
  std::filesystem::path page_file;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().filename().string().size() == 32) page_file = e.path();
  }
  std::error_code error;
  const uint64_t size = page_file.empty() ? 0 : std::filesystem::file_size(page_file, error);
  return !error && size >= 100 && FlipByteAt(page_file, size - 100);
}

bool FlipByteAt(const std::filesystem::path& path, uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  char c;
  if (!f.seekg(static_cast<std::streamoff>(offset)) || !f.get(c)) return false;
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(static_cast<char>(c ^ 0x01));
  return static_cast<bool>(f.flush());
}

FileSizeLimit::FileSizeLimit(uint64_t bytes) {
  // The write fails with EFBIG instead of killing the process.
  previous_handler_ = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit limit {};
  ::getrlimit(RLIMIT_FSIZE, &limit);
  soft_ = limit.rlim_cur;
  limit.rlim_cur = bytes;
  ::setrlimit(RLIMIT_FSIZE, &limit);
}

FileSizeLimit::~FileSizeLimit() {
  struct rlimit limit {};
  ::getrlimit(RLIMIT_FSIZE, &limit);
  limit.rlim_cur = soft_;
  ::setrlimit(RLIMIT_FSIZE, &limit);
  ::signal(SIGXFSZ, previous_handler_);
}

}  // namespace cairn::testing
