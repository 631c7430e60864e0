#include "fuse/readahead.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "testing/test_util.h"

namespace cairn::fuse {
namespace {

constexpr const char* kMountinfo =
    "22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
    "40 22 0:35 / /mnt/data rw,nosuid shared:20 - fuse.cairn cairn ro,user_id=0\n"
    "41 22 0:36 / /mnt/my\\040data rw,nosuid shared:21 - fuse.cairn cairn ro\n"
    "42 40 0:37 / /mnt/data rw,nosuid shared:22 - fuse.cairn cairn ro\n";

TEST(MountDeviceTest, FindsTheVisibleMountOfAPath) {
  // Mounted twice on one path: the later line is the one that path shows.
  StatusOr<std::string> dev = MountDeviceFromMountinfo(kMountinfo, "/mnt/data");
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  EXPECT_EQ(*dev, "0:37");
  dev = MountDeviceFromMountinfo(kMountinfo, "/");
  ASSERT_TRUE(dev.ok());
  EXPECT_EQ(*dev, "254:1");
}

TEST(MountDeviceTest, UnescapesOctalInMountPoints) {
  StatusOr<std::string> dev = MountDeviceFromMountinfo(kMountinfo, "/mnt/my data");
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  EXPECT_EQ(*dev, "0:36");
  EXPECT_EQ(MountDeviceFromMountinfo(kMountinfo, "/mnt/my\\040data").status().code(),
            StatusCode::kNotFound);
}

TEST(MountDeviceTest, RefusesUnknownPathsAndMalformedLines) {
  EXPECT_EQ(MountDeviceFromMountinfo(kMountinfo, "/mnt").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(MountDeviceFromMountinfo("", "/mnt/data").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(MountDeviceFromMountinfo("40 22 0:35\n", "/mnt/data").status().code(),
            StatusCode::kNotFound);
  for (const char* bad : {"40 22 x:35 / /mnt/data rw\n", "40 22 0: / /mnt/data rw\n",
                          "40 22 :1 / /mnt/data rw\n", "40 22 ../0:1 / /mnt/data rw\n"}) {
    EXPECT_EQ(MountDeviceFromMountinfo(bad, "/mnt/data").status().code(),
              StatusCode::kInvalidArgument)
        << bad;
  }
}

TEST(MountDeviceTest, FindsThisProcesssRootMount) {
  StatusOr<std::string> dev = MountDevice("/");
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  EXPECT_NE(dev->find(':'), std::string::npos);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(SetReadaheadKbTest, WritesTheBdiFile) {
  testing::TempDir root("bdi");
  std::filesystem::create_directories(root.str() + "/0:37");
  { std::ofstream(root.str() + "/0:37/read_ahead_kb") << "128\n"; }
  ASSERT_TRUE(SetReadaheadKb("0:37", 4096, root.str()).ok());
  EXPECT_EQ(ReadAll(root.str() + "/0:37/read_ahead_kb"), "4096\n");
}

TEST(SetReadaheadKbTest, RefusesBadDevicesAndMissingFiles) {
  testing::TempDir root("bdi");
  EXPECT_EQ(SetReadaheadKb("../etc", 1, root.str()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SetReadaheadKb("0:1/../../x", 1, root.str()).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(SetReadaheadKb("0:99", 1, root.str()).ok());
}

}  // namespace
}  // namespace cairn::fuse
