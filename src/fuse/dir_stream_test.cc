#include "fuse/dir_stream.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "fuse/fake_client.h"

namespace cairn::fuse {
namespace {

std::string Name(int i) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "f%05d", i);
  return buf;
}

class DirStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 250; ++i) ASSERT_TRUE(client_.PutFile("/d/" + Name(i), "x").ok());
  }
  FakeClient client_;
};

TEST_F(DirStreamTest, SequentialReadListsEachEntryOnceWithOneCallPerPage) {
  DirStream stream(&client_, "/d", 100);
  ASSERT_TRUE(stream.Start().ok());
  std::set<std::string> seen;
  for (uint64_t i = 0;; ++i) {
    StatusOr<const FileInfo*> at = stream.At(i);
    ASSERT_TRUE(at.ok()) << at.status().ToString();
    if (*at == nullptr) break;
    EXPECT_EQ((*at)->name, Name(static_cast<int>(i)));
    EXPECT_TRUE(seen.insert((*at)->name).second);
  }
  EXPECT_EQ(seen.size(), 250u);
  EXPECT_EQ(stream.pages_loaded(), 3u);
  EXPECT_EQ(client_.counters().max_list_entries_seen, 100);
}

TEST_F(DirStreamTest, SeekBackwardsRestartsFromNearestPage) {
  DirStream stream(&client_, "/d", 100);
  ASSERT_TRUE(stream.At(249).ok());  // Walks pages 0, 1, 2.
  EXPECT_EQ(stream.pages_loaded(), 3u);
  StatusOr<const FileInfo*> at = stream.At(150);  // Page 1 again, not page 0.
  ASSERT_TRUE(at.ok());
  EXPECT_EQ((*at)->name, Name(150));
  EXPECT_EQ(stream.pages_loaded(), 4u);
  at = stream.At(5);
  ASSERT_TRUE(at.ok());
  EXPECT_EQ((*at)->name, Name(5));
  EXPECT_EQ(stream.pages_loaded(), 5u);
  at = stream.At(7);  // Same page: no call.
  EXPECT_EQ(stream.pages_loaded(), 5u);
}

TEST_F(DirStreamTest, PastTheEndIsNullNotError) {
  DirStream stream(&client_, "/d", 1000);
  StatusOr<const FileInfo*> at = stream.At(250);
  ASSERT_TRUE(at.ok());
  EXPECT_EQ(*at, nullptr);
  at = stream.At(1'000'000);
  ASSERT_TRUE(at.ok());
  EXPECT_EQ(*at, nullptr);
}

TEST_F(DirStreamTest, ListingThatShrankBetweenPagesStillTerminates) {
  DirStream stream(&client_, "/d", 100);
  ASSERT_TRUE(stream.At(120).ok());
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(client_.Remove("/d/" + Name(i)).ok());
  // Page 0 re-listed now holds the last 50 names; checkpoints after it are rebuilt.
  StatusOr<const FileInfo*> at = stream.At(10);
  ASSERT_TRUE(at.ok());
  EXPECT_EQ((*at)->name, Name(210));
  at = stream.At(60);
  ASSERT_TRUE(at.ok());
  EXPECT_EQ(*at, nullptr);
}

TEST_F(DirStreamTest, ErrorsComeFromTheClient) {
  DirStream missing(&client_, "/nope", 10);
  EXPECT_EQ(missing.Start().code(), StatusCode::kNotFound);
  client_.InjectError("/d", UnavailableError("down"));
  DirStream failing(&client_, "/d", 10);
  EXPECT_EQ(failing.At(0).status().code(), StatusCode::kUnavailable);
}

// A client that returns an empty page with the token it was given: no progress possible.
class StuckClient : public FakeClient {
 public:
  StatusOr<DirPage> ListDir(std::string_view, std::string_view token, int) override {
    DirPage page;
    page.next_token = token.empty() ? "t" : std::string(token);
    return page;
  }
};

TEST(DirStreamStuckTest, NoProgressIsAnErrorNotALoop) {
  StuckClient client;
  DirStream stream(&client, "/", 10);
  StatusOr<const FileInfo*> at = stream.At(0);
  EXPECT_EQ(at.status().code(), StatusCode::kInternal);
}

// Names the kernel cannot show are dropped before positions are assigned.
class BadNamesClient : public FakeClient {
 public:
  StatusOr<DirPage> ListDir(std::string_view, std::string_view, int) override {
    DirPage page;
    for (const char* name : {"", ".", "..", "a/b", "ok"}) {
      FileInfo info;
      info.name = name;
      page.entries.push_back(info);
    }
    return page;
  }
};

TEST(DirStreamNamesTest, UnrepresentableNamesAreSkipped) {
  BadNamesClient client;
  DirStream stream(&client, "/", 10);
  StatusOr<const FileInfo*> at = stream.At(0);
  ASSERT_TRUE(at.ok());
  EXPECT_EQ((*at)->name, "ok");
  EXPECT_EQ(*stream.At(1), nullptr);
  EXPECT_FALSE(IsRepresentableName(std::string("a\0b", 3)));
  EXPECT_TRUE(IsRepresentableName("name with spaces é"));
}

}  // namespace
}  // namespace cairn::fuse
