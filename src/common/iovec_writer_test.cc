#include "common/iovec_writer.h"

#include <gtest/gtest.h>

#include <string>

namespace cairn {
namespace {

std::vector<iovec> Buffers(std::vector<std::string>& parts) {
  std::vector<iovec> iov;
  for (std::string& p : parts) iov.push_back({p.data(), p.size()});
  return iov;
}

// A writer that takes at most `step` bytes a call, as a full socket or a signal would leave it.
struct ShortWriter {
  explicit ShortWriter(size_t max_step) : step(max_step) {}
  size_t step;
  std::string out;
  int calls = 0;
  int max_count = 0;
  ssize_t operator()(const iovec* iov, int count) {
    ++calls;
    max_count = std::max(max_count, count);
    size_t done = 0;
    for (int i = 0; i < count && done < step; ++i) {
      const size_t n = std::min(step - done, iov[i].iov_len);
      out.append(static_cast<const char*>(iov[i].iov_base), n);
      done += n;
    }
    return static_cast<ssize_t>(done);
  }
};

TEST(IovecWriterTest, ShortWritesResumeWhereTheyStopped) {
  std::vector<std::string> parts = {"head", "", "payload-bytes", "x", "", "tail"};
  std::vector<iovec> iov = Buffers(parts);
  ShortWriter w(3);
  EXPECT_EQ(WriteAllIovecs(iov, [&](const iovec* v, int c) { return w(v, c); }), 0);
  EXPECT_EQ(w.out, "headpayload-bytesxtail");
  EXPECT_EQ(w.calls, 8);  // 22 bytes, 3 at a time.
}

TEST(IovecWriterTest, AtMostIovMaxBuffersACall) {
  std::vector<std::string> parts(IOV_MAX * 2 + 5, "ab");
  std::vector<iovec> iov = Buffers(parts);
  ShortWriter w(SIZE_MAX);
  EXPECT_EQ(WriteAllIovecs(iov, [&](const iovec* v, int c) { return w(v, c); }), 0);
  EXPECT_EQ(w.out.size(), parts.size() * 2);
  EXPECT_EQ(w.max_count, IOV_MAX);
  EXPECT_EQ(w.calls, 3);
}

TEST(IovecWriterTest, InterruptionsAreRetriedAndErrorsReturned) {
  std::vector<std::string> parts = {"abc", "def"};
  std::vector<iovec> iov = Buffers(parts);
  int calls = 0;
  std::string out;
  auto interrupted_once = [&](const iovec* v, int c) -> ssize_t {
    if (calls++ == 0) {
      errno = EINTR;
      return -1;
    }
    for (int i = 0; i < c; ++i) out.append(static_cast<const char*>(v[i].iov_base), v[i].iov_len);
    return static_cast<ssize_t>(out.size());
  };
  EXPECT_EQ(WriteAllIovecs(iov, interrupted_once), 0);
  EXPECT_EQ(out, "abcdef");

  std::vector<iovec> again = Buffers(parts);
  EXPECT_EQ(WriteAllIovecs(again,
                           [](const iovec*, int) -> ssize_t {
                             errno = EPIPE;
                             return -1;
                           }),
            EPIPE);
  std::vector<iovec> stuck = Buffers(parts);
  EXPECT_EQ(WriteAllIovecs(stuck, [](const iovec*, int) -> ssize_t { return 0; }), EIO)
      << "a call that writes nothing must not spin";
  std::vector<iovec> none;
  EXPECT_EQ(WriteAllIovecs(none, [](const iovec*, int) -> ssize_t { return 0; }), 0);
}

}  // namespace
}  // namespace cairn
