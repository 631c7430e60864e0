// Real-mount tests of the FUSE mount's life cycle (mount errors, stop, signals, dead daemons)
// and of version handling across opens (keep_cache, changed objects).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>

#include "common/clock.h"
#include "fuse/fuse_test_fixture.h"

namespace cairn::fuse::testing {
namespace {

// Forks a child that mounts a one-file namespace at `mnt` and serves it until stopped; the
// child exits 0 when Run() returned OK, 2 when Mount failed, 3 when Run failed.
pid_t SpawnMountChild(const std::string& mnt, bool auto_unmount) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  FakeClient client;
  if (!client.PutFile("/hello", "hi").ok()) ::_exit(4);
  FuseOptions options;
  options.mountpoint = mnt;
  options.auto_unmount = auto_unmount;
  StatusOr<std::unique_ptr<FuseMount>> mount = FuseMount::Mount(&client, options);
  if (!mount.ok()) ::_exit(2);
  const Status served = (*mount)->Run();
  mount->reset();
  ::_exit(served.ok() ? 0 : 3);
}

// Waits for `pid` to exit; returns its exit code, or -1 on timeout/abnormal end (the child is
// then killed).
int WaitChild(pid_t pid, std::chrono::milliseconds timeout = std::chrono::seconds(15)) {
  int status = 0;
  bool exited = WaitFor([&] { return ::waitpid(pid, &status, WNOHANG) == pid; }, timeout);
  if (!exited) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

using FuseLifecycleTest = FuseMountTest;

TEST_F(FuseLifecycleTest, MountIsReadOnlyCairnFuse) {
  StartMount();
  const std::string line = MountLine(mnt_);
  EXPECT_EQ(line.rfind("cairn " + mnt_ + " fuse.cairn ro,", 0), 0u) << line;
  EXPECT_EQ(mount_->mountpoint(), mnt_);
}

TEST_F(FuseLifecycleTest, RequestStopUnmountsCleanly) {
  Put("/f", "data");
  StartMount();
  int err = 0;
  EXPECT_EQ(ReadWholeFile(P("/f"), &err), "data");
  EXPECT_TRUE(StopMount().ok());
  EXPECT_FALSE(IsFuseMounted(mnt_));
  EXPECT_TRUE(MountLine(mnt_).empty());
  struct stat st;
  EXPECT_EQ(::stat(P("/f").c_str(), &st), -1);  // The plain directory is back.
}

TEST_F(FuseLifecycleTest, StopWithOpenFilesAndIdleLoop) {
  Put("/f", "data");
  StartMount();
  const int fd = ::open(P("/f").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  // The loop is idle (nothing in flight): RequestStop must still wake it.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_TRUE(StopMount().ok());
  EXPECT_FALSE(IsFuseMounted(mnt_));
  char buf[4];
  EXPECT_EQ(::read(fd, buf, sizeof(buf)), -1);  // The connection is gone.
  ::close(fd);
}

TEST_F(FuseLifecycleTest, StopBeforeRunAndRunTwice) {
  FuseOptions options;
  options.mountpoint = mnt_;
  StatusOr<std::unique_ptr<FuseMount>> mount = FuseMount::Mount(client_.get(), options);
  ASSERT_TRUE(mount.ok()) << mount.status().ToString();
  EXPECT_TRUE(IsFuseMounted(mnt_));
  (*mount)->RequestStop();
  EXPECT_TRUE((*mount)->Run().ok());
  EXPECT_FALSE(IsFuseMounted(mnt_));
  EXPECT_EQ((*mount)->Run().code(), StatusCode::kFailedPrecondition);
}

TEST_F(FuseLifecycleTest, DestructorUnmountsWhenNeverRun) {
  FuseOptions options;
  options.mountpoint = mnt_;
  StatusOr<std::unique_ptr<FuseMount>> mount = FuseMount::Mount(client_.get(), options);
  ASSERT_TRUE(mount.ok()) << mount.status().ToString();
  EXPECT_TRUE(IsFuseMounted(mnt_));
  mount->reset();
  EXPECT_FALSE(IsFuseMounted(mnt_));
}

TEST_F(FuseLifecycleTest, ExternalUnmountEndsRun) {
  StartMount();
  CommandResult umount = RunCommand("fusermount3 -u " + ShellQuote(mnt_) + " 2>&1");
  EXPECT_EQ(umount.exit_code, 0) << umount.output;
  run_thread_.join();
  EXPECT_TRUE(run_status_.ok()) << run_status_.ToString();
  EXPECT_FALSE(IsFuseMounted(mnt_));
  mount_.reset();
}

TEST_F(FuseLifecycleTest, MountErrorsAreStatusesNotCrashes) {
  FuseOptions options;
  options.mountpoint = dir_ + "/missing";
  StatusOr<std::unique_ptr<FuseMount>> r = FuseMount::Mount(client_.get(), options);
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("mount point " + dir_ + "/missing does not exist"),
            std::string::npos)
      << r.status().message();

  const std::string file = dir_ + "/file";
  std::ofstream(file) << "x";
  options.mountpoint = file;
  r = FuseMount::Mount(client_.get(), options);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("not a directory"), std::string::npos);

  options.mountpoint = mnt_;
  EXPECT_EQ(FuseMount::Mount(nullptr, options).status().code(), StatusCode::kInvalidArgument);
  FuseOptions bad = options;
  bad.max_threads = 0;
  EXPECT_EQ(FuseMount::Mount(client_.get(), bad).status().code(), StatusCode::kInvalidArgument);
  bad = options;
  bad.attr_timeout_s = -1;
  EXPECT_EQ(FuseMount::Mount(client_.get(), bad).status().code(), StatusCode::kInvalidArgument);
  for (const char* opt : {"rw", "max_read=4096", "a,b", "no_such_fuse_option"}) {
    bad = options;
    bad.extra_options = {opt};
    r = FuseMount::Mount(client_.get(), bad);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << opt;
    EXPECT_FALSE(IsFuseMounted(mnt_)) << opt;
  }
}

class FuseSignalTest : public FuseMountTest, public ::testing::WithParamInterface<int> {};

TEST_P(FuseSignalTest, SignalToDaemonUnmountsAndExitsZero) {
  const pid_t pid = SpawnMountChild(mnt_, /*auto_unmount=*/false);
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(WaitFor([&] { return IsFuseMounted(mnt_); }));
  int err = 0;
  EXPECT_TRUE(WaitFor([&] { return ReadWholeFile(P("/hello"), &err) == "hi"; }));
  ASSERT_EQ(::kill(pid, GetParam()), 0);
  EXPECT_EQ(WaitChild(pid), 0);
  EXPECT_FALSE(IsFuseMounted(mnt_));
}

INSTANTIATE_TEST_SUITE_P(Signals, FuseSignalTest, ::testing::Values(SIGTERM, SIGINT, SIGHUP),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(sigabbrev_np(info.param));
                         });

TEST_F(FuseLifecycleTest, KilledDaemonLeavesDeadMountThatMountReports) {
  const pid_t pid = SpawnMountChild(mnt_, /*auto_unmount=*/false);
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(WaitFor([&] { return IsFuseMounted(mnt_); }));
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  struct stat st;
  EXPECT_EQ(::stat(mnt_.c_str(), &st), -1);
  EXPECT_EQ(errno, ENOTCONN);
  FuseOptions options;
  options.mountpoint = mnt_;
  StatusOr<std::unique_ptr<FuseMount>> r = FuseMount::Mount(client_.get(), options);
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("fusermount3 -u"), std::string::npos);
  ForceUnmount(mnt_);
  EXPECT_FALSE(IsFuseMounted(mnt_));
}

TEST_F(FuseLifecycleTest, AutoUnmountRemovesTheMountOfAKilledDaemon) {
  // fusermount3 (3.14) unmounts only when its probe of the dead mount fails with ENOTCONN; if
  // the probe reaches the kernel while the connection is still being torn down it gets
  // ECONNABORTED and leaves the mount. That upstream race is rare, so a broken auto_unmount
  // fails every attempt while the race fails at most one.
  bool unmounted = false;
  for (int attempt = 0; attempt < 3 && !unmounted; ++attempt) {
    const pid_t pid = SpawnMountChild(mnt_, /*auto_unmount=*/true);
    ASSERT_GT(pid, 0);
    ASSERT_TRUE(WaitFor([&] { return IsFuseMounted(mnt_); }));
    int err = 0;
    EXPECT_TRUE(WaitFor([&] { return ReadWholeFile(P("/hello"), &err) == "hi"; }));
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    unmounted = WaitFor([&] { return !IsFuseMounted(mnt_); }, std::chrono::seconds(5));
    ForceUnmount(mnt_);
  }
  EXPECT_TRUE(unmounted);
}

TEST_F(FuseLifecycleTest, ForgottenEntriesLeaveTheInodeTable) {
  Put("/gone", "bye");
  Put("/stay", "x");
  FuseOptions options;
  options.entry_timeout_s = 0.1;
  options.attr_timeout_s = 0.1;
  options.negative_timeout_s = 0;
  StartMount(options);
  struct stat st;
  ASSERT_EQ(::stat(P("/gone").c_str(), &st), 0);
  ASSERT_EQ(::stat(P("/stay").c_str(), &st), 0);
  const uint64_t known = mount_->Stats().known_inodes;
  EXPECT_EQ(known, 3u);  // Root, /gone, /stay.
  ASSERT_TRUE(client_->Remove("/gone").ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(::stat(P("/gone").c_str(), &st), -1);
  EXPECT_EQ(errno, ENOENT);
  // The kernel drops the stale dentry and its inode and sends FORGET.
  EXPECT_TRUE(WaitFor([&] { return mount_->Stats().known_inodes == known - 1; }))
      << mount_->Stats().known_inodes;
  const int fd = ::open(P("/stay").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(mount_->Stats().open_files, 1u);
  ::close(fd);
  EXPECT_TRUE(WaitFor([&] { return mount_->Stats().open_files == 0; }));
}

class FuseVersionTest : public FuseMountTest {
 protected:
  // A client whose metadata stays cached for an hour of clock_ time.
  void UseCachingClient(bool fail_reads_after_change = false) {
    FakeClientOptions options;
    options.clock = &clock_;
    options.metadata_ttl = std::chrono::hours(1);
    options.fail_reads_after_change = fail_reads_after_change;
    options.read_chunk_limit = 100'000;
    client_ = std::make_unique<FakeClient>(options);
  }
  std::string Read(const std::string& rel) {
    int err = 0;
    std::string bytes = ReadWholeFile(P(rel), &err);
    EXPECT_EQ(err, 0) << rel << ": " << std::strerror(err);
    return bytes;
  }
  FakeClock clock_;
};

TEST_F(FuseVersionTest, UnchangedObjectIsServedFromPageCacheOnReopen) {
  Put("/f", TestBytes(300'000, 5));
  StartMount();
  EXPECT_TRUE(SameBytes(Read("/f"), files_["/f"]));
  const uint64_t reads = client_->counters().read_calls;
  ASSERT_GT(reads, 0u);
  EXPECT_TRUE(SameBytes(Read("/f"), files_["/f"]));
  EXPECT_TRUE(SameBytes(Read("/f"), files_["/f"]));
  EXPECT_EQ(client_->counters().read_calls, reads) << "keep_cache should have kept the pages";
}

TEST_F(FuseVersionTest, ChangedObjectIsReadAfterMetadataExpiry) {
  UseCachingClient();
  Put("/f", std::string(5000, 'A'));
  StartMount();
  EXPECT_TRUE(SameBytes(Read("/f"), std::string(5000, 'A')));

  // Same size and mtime: only the version tells the change apart.
  Put("/f", std::string(5000, 'B'));
  EXPECT_TRUE(SameBytes(Read("/f"), std::string(5000, 'A')))
      << "the client's metadata is still cached";
  clock_.Advance(std::chrono::hours(2));
  EXPECT_TRUE(SameBytes(Read("/f"), std::string(5000, 'B')));

  // Grown: the kernel must learn the new size right at open, not after its attr timeout.
  Put("/f", std::string(9000, 'C'));
  clock_.Advance(std::chrono::hours(2));
  EXPECT_TRUE(SameBytes(Read("/f"), std::string(9000, 'C')));

  // Shrunk.
  Put("/f", "D");
  clock_.Advance(std::chrono::hours(2));
  EXPECT_TRUE(SameBytes(Read("/f"), "D"));
}

TEST_F(FuseVersionTest, OpenFileOfAChangedObjectFailsWithEio) {
  UseCachingClient(/*fail_reads_after_change=*/true);
  Put("/f", TestBytes(4 * kMiB, 6));
  StartMount();
  const int fd = ::open(P("/f").c_str(), O_RDONLY | O_DIRECT);
  ASSERT_GE(fd, 0);
  char buf[4096];
  ASSERT_EQ(::pread(fd, buf, sizeof(buf), 0), static_cast<ssize_t>(sizeof(buf)));
  Put("/f", TestBytes(4 * kMiB, 7));
  EXPECT_EQ(::pread(fd, buf, sizeof(buf), 2 * kMiB), -1);
  EXPECT_EQ(errno, EIO);
  ::close(fd);
  clock_.Advance(std::chrono::hours(2));
  EXPECT_TRUE(SameBytes(Read("/f"), files_["/f"]));  // A reopen sees the new version.
}

TEST_F(FuseVersionTest, AHeldDescriptorKeepsItsVersionsSizeAndANewOpenGetsANewInode) {
  UseCachingClient();
  const std::string old_bytes = TestBytes(2 * kMiB + kMiB / 2 + 3, 8);  // Last page partial.
  Put("/f", old_bytes);
  StartMount();
  const int held = ::open(P("/f").c_str(), O_RDONLY);
  ASSERT_GE(held, 0);
  std::string first(old_bytes.size() + 1, '\0');
  ASSERT_EQ(::pread(held, first.data(), first.size(), 0), static_cast<ssize_t>(old_bytes.size()));
  struct stat before;
  ASSERT_EQ(::fstat(held, &before), 0);

  Put("/f", TestBytes(3 * kMiB + 11, 9));  // Grown.
  clock_.Advance(std::chrono::hours(2));
  EXPECT_TRUE(SameBytes(Read("/f"), files_["/f"]));  // A new open sees the new version...
  struct stat by_path;
  ASSERT_EQ(::stat(P("/f").c_str(), &by_path), 0);
  EXPECT_EQ(by_path.st_size, static_cast<off_t>(files_["/f"].size()));
  EXPECT_NE(by_path.st_ino, before.st_ino) << "...through an inode of its own";

  // The held descriptor's inode never learns the new size (its attributes outlive their 1 s
  // timeout here), so a read through it can only ever return the old bytes: with one inode for
  // both versions, the old last page's zero-filled tail could be read up to the new size.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  struct stat after;
  ASSERT_EQ(::fstat(held, &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino);
  EXPECT_EQ(after.st_size, static_cast<off_t>(old_bytes.size()));
  std::string again(4 * kMiB, '\0');
  const ssize_t n = ::pread(held, again.data(), again.size(), 0);
  ASSERT_EQ(n, static_cast<ssize_t>(old_bytes.size()));  // From the page cache: its pages.
  again.resize(static_cast<size_t>(n));
  EXPECT_TRUE(SameBytes(again, old_bytes));
  ::close(held);
}

}  // namespace
}  // namespace cairn::fuse::testing
