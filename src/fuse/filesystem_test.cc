// Unit tests of the pure pieces of the FUSE layer; the handlers themselves are exercised
// through a real mount in fuse_test.cc.
#include "fuse/filesystem.h"

#include <gtest/gtest.h>

#include <cerrno>

#include "fuse/errno_map.h"

namespace cairn::fuse {
namespace {

TEST(AttrFromInfoTest, FilesAndDirectories) {
  FilesystemConfig config;
  config.uid = 1234;
  config.gid = 5678;
  FileInfo file;
  file.size = 1025;
  file.mtime_ns = 1'700'000'000'123'456'789;
  struct stat st = AttrFromInfo(42, file, config);
  EXPECT_EQ(st.st_ino, 42u);
  EXPECT_EQ(st.st_mode, S_IFREG | 0444);
  EXPECT_EQ(st.st_size, 1025);
  EXPECT_EQ(st.st_blocks, 3);
  EXPECT_EQ(st.st_uid, 1234u);
  EXPECT_EQ(st.st_gid, 5678u);
  EXPECT_EQ(st.st_nlink, 1u);
  EXPECT_EQ(st.st_mtim.tv_sec, 1'700'000'000);
  EXPECT_EQ(st.st_mtim.tv_nsec, 123'456'789);
  EXPECT_EQ(st.st_ctim.tv_sec, st.st_mtim.tv_sec);

  FileInfo dir;
  dir.is_dir = true;
  dir.size = 999;  // Ignored for directories.
  st = AttrFromInfo(7, dir, config);
  EXPECT_EQ(st.st_mode, S_IFDIR | 0555);
  EXPECT_EQ(st.st_size, 0);
  EXPECT_EQ(st.st_blocks, 0);
}

TEST(AttrFromInfoTest, PreEpochTimesFloor) {
  FileInfo file;
  file.mtime_ns = -1;
  struct stat st = AttrFromInfo(2, file, FilesystemConfig{});
  EXPECT_EQ(st.st_mtim.tv_sec, -1);
  EXPECT_EQ(st.st_mtim.tv_nsec, 999'999'999);
}

TEST(JoinPathTest, RootAndNested) {
  EXPECT_EQ(JoinPath("/", "a"), "/a");
  EXPECT_EQ(JoinPath("/a", "b c"), "/a/b c");
}

TEST(ErrnoMapTest, Codes) {
  EXPECT_EQ(ErrnoFromStatus(Status::Ok()), 0);
  EXPECT_EQ(ErrnoFromStatus(NotFoundError("x")), ENOENT);
  EXPECT_EQ(ErrnoFromStatus(InvalidArgumentError("x")), EINVAL);
  EXPECT_EQ(ErrnoFromStatus(PermissionDeniedError("x")), EACCES);
  EXPECT_EQ(ErrnoFromStatus(UnavailableError("x")), EIO);
  EXPECT_EQ(ErrnoFromStatus(DeadlineExceededError("x")), EIO);
  EXPECT_EQ(ErrnoFromStatus(FailedPreconditionError("x")), EIO);
  EXPECT_EQ(ErrnoFromStatus(CorruptionError("x")), EIO);
  EXPECT_EQ(ErrnoFromStatus(ResourceExhaustedError("the write-back budget is full")), ENOSPC);
  EXPECT_EQ(ErrnoFromStatus(ResourceExhaustedError("too many files open for writing")
                                .WithReason(StatusReason::kTooManyOpenFiles)),
            EMFILE);
  EXPECT_EQ(ErrnoForReply(UnavailableError("down"), "read", "/f"), EIO);
  EXPECT_EQ(ErrnoForReply(NotFoundError("gone"), "lookup", "/f"), ENOENT);
}

}  // namespace
}  // namespace cairn::fuse
