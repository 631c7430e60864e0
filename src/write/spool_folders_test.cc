// Spool folders' stamps: what a start accepts, what it refuses and why.
#include "write/spool_folders.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "testing/test_util.h"

namespace cairn::write {
namespace {

namespace fs = std::filesystem;

class SpoolFoldersTest : public ::testing::Test {
 protected:
  std::string Folder(const std::string& name) const { return dir_.str() + "/" + name; }
  // A spool file with some bytes in it.
  std::string SpoolFile(const std::string& folder, const std::string& name) const {
    fs::create_directories(folder);
    const std::string path = folder + "/" + name;
    std::ofstream(path) << "acknowledged bytes";
    return path;
  }
  std::string StampOf(const std::string& folder) const {
    std::ifstream in(folder + "/" + kSpoolSetFile);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  testing::TempDir dir_{"spool-folders"};
  const uint64_t set_ = 0x1234abcd5678ef90ULL;
};

TEST_F(SpoolFoldersTest, NewFoldersAreAcceptedAndStamped) {
  const std::vector<std::string> dirs = {Folder("c1/spool"), Folder("c2/spool")};
  ASSERT_TRUE(CheckSpoolFolders(dirs, set_, {}).ok());
  ASSERT_TRUE(StampSpoolFolders(dirs, set_).ok());
  EXPECT_EQ(StampOf(dirs[0]), "cairn spool set 1234abcd5678ef90\n");
  EXPECT_EQ(StampOf(dirs[1]), StampOf(dirs[0]));
  EXPECT_TRUE(CheckSpoolFolders(dirs, set_, {}).ok());
  EXPECT_FALSE(fs::exists(dirs[0] + "/" + kSpoolSetFile + ".new"));
}

// The second cache disk not mounted yet: its folder is a bare mount point (or missing), the
// journal's files there are not. Taking that for the truth reported them lost.
TEST_F(SpoolFoldersTest, AFolderWhoseDiskIsMissingIsRefusedUntilItIsBackOrGivenUp) {
  const std::vector<std::string> dirs = {Folder("c1/spool"), Folder("c2/spool")};
  const std::string file = SpoolFile(dirs[1], "write-AAAAAA");
  ASSERT_TRUE(StampSpoolFolders(dirs, set_).ok());
  ASSERT_TRUE(CheckSpoolFolders(dirs, set_, {file}).ok());
  fs::rename(Folder("c2"), Folder("c2.disk"));  // Unmounted.
  for (bool bare_mount_point : {false, true}) {
    if (bare_mount_point) fs::create_directories(dirs[1]);
    const Status refused = CheckSpoolFolders(dirs, set_, {file});
    EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition) << refused.ToString();
    EXPECT_NE(refused.message().find(dirs[1]), std::string::npos) << refused.message();
    EXPECT_NE(refused.message().find("mounted"), std::string::npos) << refused.message();
  }
  fs::remove_all(Folder("c2"));
  fs::rename(Folder("c2.disk"), Folder("c2"));  // Mounted again.
  EXPECT_TRUE(CheckSpoolFolders(dirs, set_, {file}).ok());
  // Given up: an empty stamp says the folder is the journal's as it stands.
  fs::remove_all(Folder("c2"));
  fs::create_directories(dirs[1]);
  std::ofstream(dirs[1] + "/" + kSpoolSetFile).flush();
  EXPECT_TRUE(CheckSpoolFolders(dirs, set_, {file}).ok());
  ASSERT_TRUE(StampSpoolFolders(dirs, set_).ok());
  EXPECT_EQ(StampOf(dirs[1]), StampOf(dirs[0]));
}

// A folder of a worker from before stamps holds its files: it is accepted and stamped; one
// file of several gone does not make the folder a stranger (that file is reported lost).
TEST_F(SpoolFoldersTest, AnUnstampedFolderHoldingTheJournalsFilesIsAccepted) {
  const std::vector<std::string> dirs = {Folder("c1/spool")};
  const std::string kept = SpoolFile(dirs[0], "write-KEPT00");
  const std::string gone = dirs[0] + "/write-GONE00";
  EXPECT_TRUE(CheckSpoolFolders(dirs, set_, {kept, gone}).ok());
  EXPECT_EQ(CheckSpoolFolders(dirs, set_, {gone}).code(), StatusCode::kFailedPrecondition);
}

// The first cache disk missing: the journal on it is not found, a new one (another set) starts,
// and the other folders' files, named by the missing journal, were swept as unknown.
TEST_F(SpoolFoldersTest, AFolderOfAnotherJournalWithFilesItDoesNotNameIsRefused) {
  const std::vector<std::string> dirs = {Folder("c1/spool"), Folder("c2/spool")};
  const std::string theirs = SpoolFile(dirs[1], "write-THEIRS");
  ASSERT_TRUE(StampSpoolFolders(dirs, set_).ok());
  const uint64_t other = set_ + 1;
  const Status refused = CheckSpoolFolders(dirs, other, {});
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition) << refused.ToString();
  EXPECT_NE(refused.message().find("another write-back journal"), std::string::npos);
  EXPECT_NE(refused.message().find(theirs), std::string::npos) << refused.message();
  // Files the journal in use names make the folder its own (a stamp left from a crash between
  // a journal's start and its record of the set, or a folder handed over with its files).
  EXPECT_TRUE(CheckSpoolFolders(dirs, other, {theirs}).ok());
  // Nothing in it: nothing to lose; restamped.
  fs::remove(theirs);
  EXPECT_TRUE(CheckSpoolFolders(dirs, other, {}).ok());
  ASSERT_TRUE(StampSpoolFolders(dirs, other).ok());
  EXPECT_EQ(StampOf(dirs[1]), "cairn spool set 1234abcd5678ef91\n");
}

TEST_F(SpoolFoldersTest, AFileOutsideEverySpoolFolderIsRefused) {
  const std::vector<std::string> dirs = {Folder("c1/spool")};
  const std::string outside = SpoolFile(Folder("dropped/spool"), "write-OUTSDE");
  const Status refused = CheckSpoolFolders(dirs, set_, {outside});
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find(outside), std::string::npos);
  EXPECT_EQ(CheckSpoolFolders(dirs, set_, {"/etc/passwd"}).code(), StatusCode::kFailedPrecondition);
  // The same folder spelled otherwise (a trailing slash, "./", a symlink) is the folder.
  const std::string inside = SpoolFile(dirs[0], "write-INSIDE");
  fs::create_directory_symlink(dirs[0], Folder("link"));
  EXPECT_TRUE(CheckSpoolFolders({dirs[0] + "/"}, set_, {Folder("c1/./spool/write-INSIDE")}).ok());
  EXPECT_TRUE(CheckSpoolFolders({Folder("link")}, set_, {inside}).ok());
}

TEST_F(SpoolFoldersTest, AStampThatIsNotOneIsCorruption) {
  const std::vector<std::string> dirs = {Folder("c1/spool")};
  fs::create_directories(dirs[0]);
  for (const char* text : {"garbage", "cairn spool set 0000000000000000\n",
                           "cairn spool set 1234abcd5678ef90", "cairn spool set zz\n"}) {
    std::ofstream(dirs[0] + "/" + kSpoolSetFile, std::ios::trunc) << text;
    const Status refused = CheckSpoolFolders(dirs, set_, {});
    EXPECT_EQ(refused.code(), StatusCode::kCorruption) << text;
    EXPECT_NE(refused.message().find(kSpoolSetFile), std::string::npos);
  }
}

}  // namespace
}  // namespace cairn::write
