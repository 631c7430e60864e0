// Integration tests of the S3 under-storage against a real S3-compatible server (s3rver).
// Fails (never skips) when s3rver is not installed: run `npm ci` in the repository root.
#include "ufs/s3_ufs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ufs/ufs.h"
#include "ufs_s3/s3rver_process.h"

namespace cairn::ufs {
namespace {

using cairn::testing::S3rverProcess;

constexpr char kBucket[] = "cairn-test";

std::span<const char> Bytes(const std::string& s) { return {s.data(), s.size()}; }

class S3UfsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto server = S3rverProcess::Start({kBucket});
    if (server.ok()) {
      server_ = std::move(server).value().release();
    } else {
      start_error_ = new std::string(server.status().ToString());
    }
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    delete start_error_;
    start_error_ = nullptr;
  }

  void SetUp() override {
    ASSERT_EQ(start_error_, nullptr) << *start_error_;
    // Each test works below its own prefix, so tests cannot see each other's objects.
    root_ = std::string("s3://") + kBucket + "/" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ufs_ = Open(server_->Options());
  }

  std::shared_ptr<UnderStorage> Open(const UfsOptions& options) {
    auto ufs = OpenUnderStorage(root_, options);
    EXPECT_TRUE(ufs.ok()) << ufs.status().ToString();
    return ufs.ok() ? *ufs : nullptr;
  }

  std::string ReadAll(UnderStorage& ufs, const std::string& key, size_t size,
                      std::string_view version = "", uint64_t offset = 0) {
    std::string buf(size, '\0');
    auto n = ufs.Read(key, version, offset, std::span<char>(buf.data(), buf.size()));
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    buf.resize(n.ok() ? *n : 0);
    return buf;
  }

  // Pages through a listing and returns "objects" and "prefixes/" in order.
  std::vector<std::string> ListAll(UnderStorage& ufs, ListOptions options, int* pages = nullptr) {
    std::vector<std::string> items;
    int n = 0;
    while (true) {
      auto page = ufs.List(options);
      EXPECT_TRUE(page.ok()) << page.status().ToString();
      if (!page.ok()) break;
      ++n;
      for (const ObjectInfo& o : page->objects) items.push_back(o.key);
      for (const std::string& p : page->common_prefixes) items.push_back(p);
      if (page->next_token.empty()) break;
      options.continuation_token = page->next_token;
      EXPECT_LT(n, 1000) << "listing does not terminate";
      if (n >= 1000) break;
    }
    std::sort(items.begin(), items.end());
    if (pages != nullptr) *pages = n;
    return items;
  }

  static S3rverProcess* server_;
  static std::string* start_error_;
  std::string root_;
  std::shared_ptr<UnderStorage> ufs_;
};

S3rverProcess* S3UfsTest::server_ = nullptr;
std::string* S3UfsTest::start_error_ = nullptr;

TEST_F(S3UfsTest, WriteStatReadRoundTrip) {
  ASSERT_TRUE(ufs_->Write("a/b.txt", Bytes("hello world")).ok());
  auto info = ufs_->Stat("a/b.txt");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->key, "a/b.txt");
  EXPECT_EQ(info->size, 11u);
  EXPECT_EQ(info->version.size(), 32u) << info->version;  // MD5 ETag, quotes stripped.
  EXPECT_EQ(info->version.find('"'), std::string::npos);
  EXPECT_GT(info->mtime_ns, 1'600'000'000LL * 1'000'000'000);
  EXPECT_EQ(ReadAll(*ufs_, "a/b.txt", 11, info->version), "hello world");
  EXPECT_EQ(ReadAll(*ufs_, "a/b.txt", 100, "", 6), "world");
  EXPECT_EQ(ReadAll(*ufs_, "a/b.txt", 10, info->version, 11), "");
  EXPECT_EQ(ReadAll(*ufs_, "a/b.txt", 10, "", 1000), "");
  EXPECT_EQ(ufs_->RootUri(), root_);
}

TEST_F(S3UfsTest, ListsWithPrefixDelimiterAndPagination) {
  std::vector<std::string> keys = {"top.txt", "dir/sub/x", "dir/sub2/y"};
  for (int i = 0; i < 10; ++i) keys.push_back("dir/f" + std::to_string(i));
  for (const std::string& k : keys) ASSERT_TRUE(ufs_->Write(k, Bytes(k)).ok()) << k;

  ListOptions root;
  root.max_keys = 1;
  EXPECT_EQ(ListAll(*ufs_, root), (std::vector<std::string>{"dir/", "top.txt"}));

  ListOptions dir;
  dir.prefix = "dir/";
  dir.max_keys = 3;
  int pages = 0;
  std::vector<std::string> expected;
  for (int i = 0; i < 10; ++i) expected.push_back("dir/f" + std::to_string(i));
  expected.push_back("dir/sub/");
  expected.push_back("dir/sub2/");
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(ListAll(*ufs_, dir, &pages), expected);
  EXPECT_EQ(pages, 4);  // 12 items, 3 per page.

  ListOptions recursive;
  recursive.delimiter = "";
  recursive.max_keys = 4;
  std::vector<std::string> all = keys;
  std::sort(all.begin(), all.end());
  EXPECT_EQ(ListAll(*ufs_, recursive), all);

  ListOptions partial;
  partial.prefix = "dir/s";
  EXPECT_EQ(ListAll(*ufs_, partial), (std::vector<std::string>{"dir/sub/", "dir/sub2/"}));

  auto page = ufs_->List(dir);
  ASSERT_TRUE(page.ok());
  ASSERT_FALSE(page->objects.empty());
  EXPECT_EQ(page->objects[0].size, page->objects[0].key.size());
  EXPECT_FALSE(page->objects[0].version.empty());
}

TEST_F(S3UfsTest, ParallelRangedReadsMatchAcrossPartBoundaries) {
  UfsOptions options = server_->Options();
  options.parallel_read_threshold = 1 << 20;
  options.parallel_read_part = 768 << 10;  // Not a divisor of the sizes read below.
  auto ufs = Open(options);
  ASSERT_NE(ufs, nullptr);
  std::string data(20 << 20, '\0');
  std::mt19937_64 rng(42);
  for (char& c : data) c = static_cast<char>(rng());
  ASSERT_TRUE(ufs->Write("big.bin", Bytes(data)).ok());
  auto info = ufs->Stat("big.bin");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  ASSERT_EQ(info->size, data.size());

  EXPECT_TRUE(ReadAll(*ufs, "big.bin", data.size(), info->version) == data);
  const uint64_t offset = 1'000'003;
  const size_t len = (3 << 20) + 17;
  EXPECT_TRUE(ReadAll(*ufs, "big.bin", len, "", offset) == data.substr(offset, len));
  // Small read (single GET) straddling a part boundary of the parallel layout.
  EXPECT_TRUE(ReadAll(*ufs, "big.bin", 4096, info->version, (768 << 10) - 100) ==
              data.substr((768 << 10) - 100, 4096));
  // A parallel read running past the end returns only the tail.
  std::string tail = ReadAll(*ufs, "big.bin", 2 << 20, info->version, data.size() - 1000);
  EXPECT_EQ(tail.size(), 1000u);
  EXPECT_TRUE(tail == data.substr(data.size() - 1000));
}

TEST_F(S3UfsTest, OverwriteIsDetectedThroughTheETag) {
  UfsOptions options = server_->Options();
  options.parallel_read_threshold = 64 << 10;
  options.parallel_read_part = 32 << 10;
  auto ufs = Open(options);
  ASSERT_NE(ufs, nullptr);
  std::string v1(200 << 10, 'a');
  std::string v2(200 << 10, 'b');
  ASSERT_TRUE(ufs->Write("obj", Bytes(v1)).ok());
  auto e1 = ufs->Stat("obj");
  ASSERT_TRUE(e1.ok());
  ASSERT_TRUE(ufs->Write("obj", Bytes(v2)).ok());
  auto e2 = ufs->Stat("obj");
  ASSERT_TRUE(e2.ok());
  ASSERT_NE(e1->version, e2->version);

  std::string buf(1000, '\0');
  auto small = ufs->Read("obj", e1->version, 0, std::span<char>(buf.data(), buf.size()));
  EXPECT_EQ(small.status().code(), StatusCode::kFailedPrecondition) << small.status().ToString();
  std::string big(v1.size(), '\0');
  auto parallel = ufs->Read("obj", e1->version, 0, std::span<char>(big.data(), big.size()));
  EXPECT_EQ(parallel.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(ReadAll(*ufs, "obj", v2.size(), e2->version) == v2);
}

TEST_F(S3UfsTest, UnicodeSpaceAndReservedCharacterKeys) {
  std::vector<std::string> keys = {"dir with space/naïve ü 日本.txt", "a+b=c&d", "pct%20lit",
                                   "tilde~and(paren)'quote'", "semi;colon,comma@at"};
  for (const std::string& k : keys) {
    ASSERT_TRUE(ufs_->Write(k, Bytes("v:" + k)).ok()) << k;
    auto info = ufs_->Stat(k);
    ASSERT_TRUE(info.ok()) << k << ": " << info.status().ToString();
    EXPECT_EQ(ReadAll(*ufs_, k, 200), "v:" + k);
  }
  ListOptions all;
  all.delimiter = "";
  std::vector<std::string> expected = keys;
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(ListAll(*ufs_, all), expected);
  ListOptions in_dir;
  in_dir.prefix = "dir with space/";
  EXPECT_EQ(ListAll(*ufs_, in_dir), (std::vector<std::string>{keys[0]}));
}

TEST_F(S3UfsTest, DeleteAndNotFound) {
  ASSERT_TRUE(ufs_->Write("gone", Bytes("x")).ok());
  EXPECT_TRUE(ufs_->Delete("gone").ok());
  EXPECT_EQ(ufs_->Stat("gone").status().code(), StatusCode::kNotFound);
  std::string buf(10, '\0');
  EXPECT_EQ(ufs_->Read("gone", "", 0, std::span<char>(buf.data(), buf.size())).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(ufs_->Delete("gone").code(), StatusCode::kNotFound);
  ASSERT_TRUE(ufs_->Write("dir/child", Bytes("x")).ok());
  EXPECT_EQ(ufs_->Stat("dir").status().code(), StatusCode::kNotFound);
}

TEST_F(S3UfsTest, ProbeReportsHealthyStoreAndMissingBucket) {
  EXPECT_TRUE(Probe(*ufs_).ok());
  auto missing = OpenUnderStorage("s3://no-such-bucket-here", server_->Options());
  ASSERT_TRUE(missing.ok());
  Status st = Probe(**missing);
  EXPECT_EQ(st.code(), StatusCode::kNotFound) << st.ToString();
  EXPECT_NE(st.message().find("no-such-bucket-here"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("does not exist"), std::string::npos) << st.ToString();
}

TEST_F(S3UfsTest, UnreachableEndpointIsUnavailableWithinBoundedTime) {
  auto port = cairn::testing::PickFreePort();
  ASSERT_TRUE(port.ok());
  UfsOptions options = server_->Options();
  options.endpoint = "http://127.0.0.1:" + std::to_string(*port);
  options.max_retries = 2;
  options.connect_timeout_ms = 500;
  auto ufs = OpenUnderStorage("s3://bucket/x", options);
  ASSERT_TRUE(ufs.ok());
  auto start = std::chrono::steady_clock::now();
  auto info = (*ufs)->Stat("k");
  Status probe = Probe(**ufs);
  auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(info.status().code(), StatusCode::kUnavailable) << info.status().ToString();
  EXPECT_NE(info.status().message().find(options.endpoint), std::string::npos)
      << info.status().ToString();
  EXPECT_EQ(probe.code(), StatusCode::kUnavailable);
  EXPECT_NE(probe.message().find("cannot reach"), std::string::npos) << probe.ToString();
  EXPECT_LT(elapsed, std::chrono::seconds(10));
}

TEST_F(S3UfsTest, ConcurrentReadersShareThePool) {
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(ufs_->Write("c/" + std::to_string(i), Bytes(std::string(5000 + i, 'a' + i))).ok());
  }
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round) {
        int i = (t + round) % 8;
        std::string buf(6000, '\0');
        auto n =
            ufs_->Read("c/" + std::to_string(i), "", 0, std::span<char>(buf.data(), buf.size()));
        if (!n.ok() || *n != 5000u + i || buf.substr(0, *n) != std::string(*n, 'a' + i)) {
          ++failures;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace cairn::ufs
