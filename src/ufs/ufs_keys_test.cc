#include "ufs/ufs_keys.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cairn::ufs {
namespace {

TEST(PortableKeyTest, AcceptsOrdinaryKeys) {
  for (std::string key :
       {"a", "a/b.c", "dir with space/ü 日本.txt", "a..b/c..", ".hidden/x", "x/...", "+&=%20"}) {
    EXPECT_TRUE(ValidatePortableKey(key).ok()) << key;
  }
}

TEST(PortableKeyTest, RejectsKeysThatCouldEscapeOrAlias) {
  for (std::string key :
       {"", "/abs", "a//b", "a/", "..", "../x", "a/../b", "a/..", ".", "./a", "a/./b"}) {
    Status st = ValidatePortableKey(key);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << "'" << key << "'";
  }
  EXPECT_EQ(ValidatePortableKey(std::string("a\0b", 3)).code(), StatusCode::kInvalidArgument);
}

TEST(PortableKeyTest, PrefixMayEndWithSlashOrPartialName) {
  for (std::string p : {"", "a/", "a/b", "a/b/", "dir with space/"}) {
    EXPECT_TRUE(ValidatePortablePrefix(p).ok()) << p;
  }
  for (std::string p : {"/a", "a//", "../", "a/../", "./"}) {
    EXPECT_EQ(ValidatePortablePrefix(p).code(), StatusCode::kInvalidArgument) << p;
  }
}

TEST(PageSizeTest, ClampsAndRejects) {
  ListOptions o;
  o.max_keys = 0;
  EXPECT_EQ(EffectivePageSize(o).status().code(), StatusCode::kInvalidArgument);
  o.max_keys = 5000;
  EXPECT_EQ(*EffectivePageSize(o), kMaxListPage);
  o.max_keys = 7;
  EXPECT_EQ(*EffectivePageSize(o), 7);
}

TEST(PrefixSuccessorTest, SkipsEverythingUnderThePrefix) {
  EXPECT_EQ(PrefixSuccessor("a/"), "a0");
  EXPECT_EQ(PrefixSuccessor(""), "");
  EXPECT_EQ(PrefixSuccessor("\xff\xff"), "");
  EXPECT_EQ(PrefixSuccessor("a\xff"), "b");
  EXPECT_GT(PrefixSuccessor("dir/"), "dir/zzzz\xff");
}

// Runs the builder over sorted keys, page by page, and returns the pages.
std::vector<ListResult> Paginate(const std::vector<std::string>& sorted_keys, ListOptions o) {
  std::vector<ListResult> pages;
  for (int guard = 0; guard < 100; ++guard) {
    ListPageBuilder b(o, o.max_keys);
    for (const std::string& k : sorted_keys) {
      auto v = b.AddObject(k, [] { return std::optional<ObjectInfo>(ObjectInfo()); });
      if (v == ListPageBuilder::Verdict::kFull) break;
    }
    pages.push_back(std::move(b).Finish());
    if (pages.back().next_token.empty()) break;
    o.continuation_token = pages.back().next_token;
  }
  return pages;
}

TEST(ListPageBuilderTest, FoldsCommonPrefixesAndPaginatesWithoutRepeats) {
  std::vector<std::string> keys = {"a.txt", "d/1", "d/2", "d/x/3", "e", "f/9", "g"};
  ListOptions o;
  o.max_keys = 2;
  auto pages = Paginate(keys, o);
  ASSERT_EQ(pages.size(), 3u);
  EXPECT_EQ(pages[0].objects.size(), 1u);
  EXPECT_EQ(pages[0].objects[0].key, "a.txt");
  EXPECT_EQ(pages[0].common_prefixes, (std::vector<std::string>{"d/"}));
  EXPECT_EQ(pages[0].next_token, "d/");
  EXPECT_EQ(pages[1].objects[0].key, "e");
  EXPECT_EQ(pages[1].common_prefixes, (std::vector<std::string>{"f/"}));
  EXPECT_EQ(pages[2].objects[0].key, "g");
  EXPECT_TRUE(pages[2].next_token.empty());
}

TEST(ListPageBuilderTest, NoTokenWhenThePageEndsExactlyAtTheLastItem) {
  ListOptions o;
  o.max_keys = 2;
  auto pages = Paginate({"a", "b"}, o);
  ASSERT_EQ(pages.size(), 1u);
  EXPECT_TRUE(pages[0].next_token.empty());
}

TEST(ListPageBuilderTest, RecursiveAndCustomDelimiter) {
  std::vector<std::string> keys = {"p/a-1", "p/a-2", "p/b", "p/c-x/y", "q"};
  ListOptions o;
  o.prefix = "p/";
  o.delimiter = "-";
  o.max_keys = 10;
  auto pages = Paginate(keys, o);
  ASSERT_EQ(pages.size(), 1u);
  EXPECT_EQ(pages[0].common_prefixes, (std::vector<std::string>{"p/a-", "p/c-"}));
  ASSERT_EQ(pages[0].objects.size(), 1u);
  EXPECT_EQ(pages[0].objects[0].key, "p/b");

  o.delimiter = "";
  o.max_keys = 1;
  pages = Paginate(keys, o);
  ASSERT_EQ(pages.size(), 4u);
  EXPECT_EQ(pages[3].objects[0].key, "p/c-x/y");
}

TEST(ListPageBuilderTest, VanishedObjectsAreDropped) {
  ListOptions o;
  ListPageBuilder b(o, 10);
  EXPECT_EQ(b.AddObject("a", [] { return std::optional<ObjectInfo>(); }),
            ListPageBuilder::Verdict::kSkipped);
  EXPECT_EQ(b.AddObject("b", [] { return std::optional<ObjectInfo>(ObjectInfo()); }),
            ListPageBuilder::Verdict::kTaken);
  ListResult r = std::move(b).Finish();
  ASSERT_EQ(r.objects.size(), 1u);
  EXPECT_EQ(r.objects[0].key, "b");
}

}  // namespace
}  // namespace cairn::ufs
