#include "common/file_util.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace cairn {
namespace {

class FileUtilTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cairn-file-util-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (const char* f : {"/a", "/a.tmp", "/big"}) unlink((dir_ + f).c_str());
    rmdir(dir_.c_str());
  }
  std::string dir_;
};

TEST_F(FileUtilTest, WritesWithTheModeAndNeverReplacesWithoutForce) {
  const std::string path = dir_ + "/a";
  ASSERT_TRUE(WriteNewFile(path, "secret", 0600, false).ok());
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto read = ReadSmallFile(path);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(*read, "secret");

  EXPECT_EQ(WriteNewFile(path, "other", 0600, false).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(*ReadSmallFile(path), "secret");
  ASSERT_TRUE(WriteNewFile(path, "other", 0644, true).ok());
  EXPECT_EQ(*ReadSmallFile(path), "other");
  EXPECT_NE(access((path + ".tmp").c_str(), F_OK), 0) << "the temporary file stays behind";
}

TEST_F(FileUtilTest, ReadsRefuseMissingAndOversizedFiles) {
  EXPECT_EQ(ReadSmallFile(dir_ + "/none").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(WriteNewFile(dir_ + "/big", std::string(100000, 'x'), 0644, false).ok());
  EXPECT_EQ(ReadSmallFile(dir_ + "/big", 1000).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadSmallFile(dir_ + "/big", 100000)->size(), 100000u);
  EXPECT_EQ(WriteNewFile(dir_ + "/no/such/dir", "x", 0600, false).code(), StatusCode::kIoError);
}

}  // namespace
}  // namespace cairn
