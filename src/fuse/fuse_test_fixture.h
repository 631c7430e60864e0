// Test fixture that mounts a FakeClient namespace for real (through /dev/fuse) on a temp
// directory and serves it from a background thread. Test-only code.
#ifndef CAIRN_FUSE_FUSE_TEST_FIXTURE_H_
#define CAIRN_FUSE_FUSE_TEST_FIXTURE_H_

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <string>
#include <thread>

#include "fuse/fake_client.h"
#include "fuse/fuse_mount.h"
#include "fuse/fuse_test_util.h"

namespace cairn::fuse::testing {

inline constexpr size_t kMiB = 1 << 20;

// Byte comparison that reports sizes and the first difference instead of dumping megabytes.
inline ::testing::AssertionResult SameBytes(const std::string& got, const std::string& want) {
  if (got == want) return ::testing::AssertionSuccess();
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  return ::testing::AssertionFailure() << "got " << got.size() << " bytes, want " << want.size()
                                       << "; first difference at offset " << i;
}

class FuseMountTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access("/dev/fuse", F_OK) != 0) GTEST_SKIP() << "/dev/fuse is not available";
    dir_ = MakeTempDir();
    mnt_ = dir_ + "/mnt";
    ASSERT_EQ(::mkdir(mnt_.c_str(), 0755), 0);
    FakeClientOptions options;
    // Short reads that end mid-page make every test exercise the read loop.
    options.read_chunk_limit = 100'000;
    client_ = std::make_unique<FakeClient>(options);
  }

  void TearDown() override {
    StopMount().IgnoreError();
    // Clean up even after a failed assertion left a mount (or a dead one) behind.
    ForceUnmount(mnt_);
    if (!dir_.empty() && !IsFuseMounted(mnt_)) RunCommand("rm -rf " + ShellQuote(dir_));
  }

  // Mounts client_ at mnt_ and serves it on a background thread.
  void StartMount(FuseOptions options = {}) {
    options.mountpoint = mnt_;
    StatusOr<std::unique_ptr<FuseMount>> mounted = FuseMount::Mount(client_.get(), options);
    ASSERT_TRUE(mounted.ok()) << mounted.status().ToString();
    mount_ = std::move(*mounted);
    run_thread_ = std::thread([this] { run_status_ = mount_->Run(); });
    ASSERT_TRUE(IsFuseMounted(mnt_));
  }

  // RequestStop + join; returns Run()'s status.
  Status StopMount() {
    if (mount_ == nullptr) return Status::Ok();
    mount_->RequestStop();
    run_thread_.join();
    mount_.reset();
    return run_status_;
  }

  // Adds a file to the fake namespace and remembers its bytes.
  void Put(const std::string& path, std::string bytes, int64_t mtime_ns = 0) {
    ASSERT_TRUE(client_->PutFile(path, bytes, mtime_ns).ok()) << path;
    files_[path] = std::move(bytes);
  }

  std::string P(const std::string& rel) const { return mnt_ + rel; }

  std::string dir_;
  std::string mnt_;
  std::unique_ptr<FakeClient> client_;
  std::unique_ptr<FuseMount> mount_;
  std::thread run_thread_;
  Status run_status_;
  std::map<std::string, std::string> files_;  // Namespace path -> contents.
};

}  // namespace cairn::fuse::testing

#endif  // CAIRN_FUSE_FUSE_TEST_FIXTURE_H_
