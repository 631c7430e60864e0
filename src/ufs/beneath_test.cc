#include "ufs/beneath.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace cairn::ufs {
namespace {

namespace fs = std::filesystem;

class RootDirTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "cairn-beneath-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    base_ = tmpl;
    fs::create_directories(base_ + "/root/sub");
    fs::create_directories(base_ + "/outside");
    std::ofstream(base_ + "/root/sub/file") << "inside";
    std::ofstream(base_ + "/outside/secret") << "secret";
    fs::create_directory_symlink(base_ + "/outside", base_ + "/root/abs_link");
    fs::create_directory_symlink("../outside", base_ + "/root/rel_link");
    fs::create_symlink("sub/file", base_ + "/root/inner_link");
    auto root = RootDir::Open(base_ + "/root", /*allow_openat2=*/GetParam());
    ASSERT_TRUE(root.ok()) << root.status().ToString();
    root_ = std::move(root).value();
  }
  void TearDown() override { fs::remove_all(base_); }

  std::string base_;
  std::unique_ptr<RootDir> root_;
};

TEST_P(RootDirTest, OpensPathsBelowTheRoot) {
  auto fd = root_->OpenBeneath("sub/file", O_RDONLY);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  char buf[16] = {0};
  EXPECT_EQ(::read(fd->get(), buf, sizeof(buf)), 6);
  EXPECT_TRUE(root_->OpenBeneath("", O_RDONLY | O_DIRECTORY).ok());
  EXPECT_EQ(root_->OpenBeneath("sub/missing", O_RDONLY).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(root_->OpenBeneath("sub/file/x", O_RDONLY).status().code(), StatusCode::kNotFound);
}

TEST_P(RootDirTest, NeverResolvesOutsideTheRoot) {
  for (std::string rel : {"abs_link/secret", "rel_link/secret", "abs_link", "rel_link"}) {
    SCOPED_TRACE(rel);
    EXPECT_EQ(root_->OpenBeneath(rel, O_RDONLY).status().code(), StatusCode::kPermissionDenied);
  }
  EXPECT_EQ(root_->OpenBeneath("../outside/secret", O_RDONLY).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(root_->MakeDirs("abs_link/new").status().code(), StatusCode::kPermissionDenied);
  EXPECT_FALSE(fs::exists(base_ + "/outside/new"));
}

TEST_P(RootDirTest, InnerSymlinksFollowOnlyWithOpenat2) {
  auto fd = root_->OpenBeneath("inner_link", O_RDONLY);
  if (root_->uses_openat2()) {
    EXPECT_TRUE(fd.ok()) << fd.status().ToString();
  } else {
    EXPECT_EQ(fd.status().code(), StatusCode::kPermissionDenied);
  }
}

TEST_P(RootDirTest, MakeDirsCreatesMissingFoldersOnly) {
  auto fd = root_->MakeDirs("a/b/c");
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  EXPECT_TRUE(fs::is_directory(base_ + "/root/a/b/c"));
  EXPECT_TRUE(root_->MakeDirs("a/b").ok());
  EXPECT_EQ(root_->MakeDirs("sub/file/x").status().code(), StatusCode::kFailedPrecondition);
}

INSTANTIATE_TEST_SUITE_P(Modes, RootDirTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Openat2IfAvailable" : "WalkFallback";
                         });

}  // namespace
}  // namespace cairn::ufs
