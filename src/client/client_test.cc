// End-to-end tests of libcairn against a real worker (in process and over TCP) on a real page
// store, with in-memory under-storage.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "client/client_impl.h"
#include "testing/test_util.h"
#include "ufs/counting_ufs.h"
#include "ufs/memory_ufs.h"
#include "worker/worker.h"

namespace cairn::client {
namespace {

constexpr uint32_t kPage = 256 * 1024;

std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

struct Mode {
  bool tcp;
  bool short_circuit = false;
};
void PrintTo(const Mode& m, std::ostream* os) {
  *os << (m.tcp ? (m.short_circuit ? "tcp+short-circuit" : "tcp") : "in-process");
}

class ClientTest : public ::testing::TestWithParam<Mode> {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("cairn-client-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    std::filesystem::remove_all(dir_);
    memory_ = std::make_shared<ufs::MemoryUnderStorage>("mem://lake");
    spec_.path = "/lake";
    spec_.uri = "mem://lake";
    spec_.metadata_ttl = std::chrono::milliseconds(200);
    StartWorker();
  }
  void TearDown() override {
    client_.reset();
    worker_.reset();
    std::filesystem::remove_all(dir_);
  }

  void StartWorker(uint16_t port = 0) {
    worker::WorkerOptions o;
    o.mounts = {spec_};
    o.ufs_override = {memory_};
    o.page_size = kPage;
    o.serve_tcp = GetParam().tcp;
    o.config.listen = "127.0.0.1:" + std::to_string(port);
    o.config.metrics_listen = "";
    o.config.cache_dirs.push_back({dir_.string(), 256ull << 20});
    auto w = worker::Worker::Start(o);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    worker_ = std::move(w).value();
  }

  void MakeClient(std::vector<std::string> workers = {}, bool unbuffered_small_files = false) {
    ClientOptions co;
    co.page_size = kPage;
    co.unbuffered_small_files = unbuffered_small_files;
    co.mounts = {spec_};
    co.worker_timeout = std::chrono::milliseconds(2000);
    co.short_circuit = GetParam().short_circuit;
    if (GetParam().tcp) {
      co.workers = workers.empty()
                       ? std::vector<std::string>{"127.0.0.1:" + std::to_string(worker_->port())}
                       : workers;
    } else {
      co.local_channel = worker_->local_channel();
    }
    client_ufs_ = std::make_shared<ufs::CountingUnderStorage>(memory_);
    auto mounts = mount::MountTable::CreateWith({spec_}, {client_ufs_});
    ASSERT_TRUE(mounts.ok());
    auto fetcher = MakePageFetcher(co);
    ASSERT_TRUE(fetcher.ok());
    client_ = std::make_unique<ClientImpl>(co, *mounts, std::move(fetcher).value(), Clock::Real());
  }

  std::string ReadAll(const std::string& path, size_t chunk) {
    auto reader = client_->Open(path);
    EXPECT_TRUE(reader.ok()) << reader.status().ToString();
    if (!reader.ok()) return "";
    std::string out;
    std::string buf(chunk, '\0');
    while (true) {
      auto n = (*reader)->Read(out.size(), buf);
      EXPECT_TRUE(n.ok()) << n.status().ToString();
      if (!n.ok() || *n == 0) break;
      out.append(buf.data(), *n);
    }
    return out;
  }

  static inline int counter_ = 0;
  std::filesystem::path dir_;
  std::shared_ptr<ufs::MemoryUnderStorage> memory_;
  std::shared_ptr<ufs::CountingUnderStorage> client_ufs_;  // What the client asks the source.
  MountSpec spec_;
  std::unique_ptr<worker::Worker> worker_;
  std::unique_ptr<ClientImpl> client_;
};

TEST_P(ClientTest, ReadsEveryFileShapeByteForByte) {
  std::map<std::string, std::string> files = {
      {"empty", ""},
      {"one", "x"},
      {"exact", RandomBytes(kPage * 3, 1)},
      {"odd", RandomBytes(kPage * 2 + 12345, 2)},
      {"dir/with space/ünïcode ✓.bin", RandomBytes(70000, 3)},
  };
  for (auto& [k, v] : files) memory_->Put(k, v);
  MakeClient();
  for (int pass = 0; pass < 2; ++pass) {  // Cold, then warm.
    for (auto& [k, v] : files) {
      EXPECT_EQ(ReadAll("/lake/" + k, 100000), v) << k << " pass " << pass;
    }
  }
  auto st = client_->Stat("/lake/odd");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->size, kPage * 2 + 12345);
  EXPECT_FALSE(st->is_dir);
  EXPECT_TRUE(client_->Stat("/lake/dir/with space")->is_dir);
  EXPECT_TRUE(client_->Stat("/")->is_dir);
  EXPECT_EQ(client_->Stat("/lake/nope").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(client_->Stat("/other").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(client_->Open("/lake/dir").status().code(), StatusCode::kInvalidArgument);
}

TEST_P(ClientTest, RandomRangedReadsAcrossPageBoundaries) {
  std::string data = RandomBytes(kPage * 5 + 777, 4);
  memory_->Put("r.bin", data);
  MakeClient();
  auto reader = client_->Open("/lake/r.bin");
  ASSERT_TRUE(reader.ok());
  std::mt19937_64 rng(7);
  for (int i = 0; i < 300; ++i) {
    uint64_t off = rng() % (data.size() + 10);
    size_t len = 1 + rng() % (kPage + 5000);
    std::string buf(len, '\0');
    auto n = (*reader)->Read(off, buf);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    size_t want = off >= data.size() ? 0 : std::min<size_t>(len, data.size() - off);
    ASSERT_EQ(*n, want);
    ASSERT_EQ(buf.substr(0, *n), data.substr(std::min<uint64_t>(off, data.size()), want));
  }
}

// ReadInPlace (the FUSE reply path) returns the same bytes as Read: buffered pages in place,
// the rest in the caller's scratch buffer, across page boundaries and up to the end of file.
TEST_P(ClientTest, ReadInPlaceReturnsExactBytesAcrossPagesAndAtEndOfFile) {
  std::string data = RandomBytes(kPage * 4 + 4321, 5);
  memory_->Put("v.bin", data);
  MakeClient();
  auto reader = client_->Open("/lake/v.bin");
  ASSERT_TRUE(reader.ok());
  auto read = [&](uint64_t off, size_t len, size_t* in_place) {
    std::vector<char> scratch(len);
    StatusOr<ReadView> view = (*reader)->ReadInPlace(off, scratch);
    EXPECT_TRUE(view.ok()) << view.status().ToString();
    std::string got;
    if (!view.ok()) return got;
    for (std::span<const char> piece : view->pieces) {
      bool in_scratch = piece.data() >= scratch.data() &&
                        piece.data() + piece.size() <= scratch.data() + scratch.size();
      if (!in_scratch) *in_place += piece.size();
      got.append(piece.data(), piece.size());
    }
    EXPECT_EQ(got.size(), view->size);
    return got;
  };
  // Sequential, in reads that straddle page boundaries: pages land in the buffer and are
  // returned where they lie.
  size_t in_place = 0;
  std::string all;
  const size_t chunk = kPage / 2 + 999;
  for (uint64_t off = 0; off < data.size(); off += chunk) all += read(off, chunk, &in_place);
  EXPECT_EQ(all, data);
  EXPECT_GT(in_place, data.size() / 2);
  // At and past the end of file.
  size_t ignored = 0;
  EXPECT_EQ(read(data.size() - 10, 4096, &ignored), data.substr(data.size() - 10));
  EXPECT_EQ(read(data.size(), 4096, &ignored), "");
  EXPECT_EQ(read(data.size() + 5, 4096, &ignored), "");
  // Random ranges.
  std::mt19937_64 rng(9);
  for (int i = 0; i < 200; ++i) {
    uint64_t off = rng() % data.size();
    size_t len = 1 + rng() % (2 * kPage);
    size_t want = std::min<size_t>(len, data.size() - off);
    ASSERT_EQ(read(off, len, &ignored), data.substr(off, want)) << off << "+" << len;
  }
}

TEST_P(ClientTest, ListsLargeFoldersInPages) {
  for (int i = 0; i < 2500; ++i) memory_->Put("big/f" + std::to_string(i), "v");
  memory_->Put("big/sub/x", "1");
  MakeClient();
  std::set<std::string> names;
  std::string token;
  int pages = 0;
  do {
    auto page = client_->ListDir("/lake/big", token, 1000);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    for (const auto& e : page->entries) EXPECT_TRUE(names.insert(e.name).second) << e.name;
    token = page->next_token;
    ++pages;
  } while (!token.empty());
  EXPECT_EQ(names.size(), 2501u);
  EXPECT_GE(pages, 3);
  auto root = client_->ListDir("/", "", 1000);
  ASSERT_TRUE(root.ok());
  ASSERT_EQ(root->entries.size(), 1u);
  EXPECT_EQ(root->entries[0].name, "lake");
  EXPECT_TRUE(root->entries[0].is_dir);
}

TEST_P(ClientTest, StatsOfSiblingsCostOneListingNotOneRequestEach) {
  for (int i = 0; i < 200; ++i) memory_->Put("ds/f" + std::to_string(i), "data");
  for (int i = 0; i < 1500; ++i) memory_->Put("huge/f" + std::to_string(10000 + i), "x");
  MakeClient();
  for (int i = 0; i < 200; ++i) {
    auto st = client_->Stat("/lake/ds/f" + std::to_string(i));
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    EXPECT_EQ(st->size, 4u);
  }
  EXPECT_EQ(client_->Stat("/lake/ds/absent").status().code(), StatusCode::kNotFound);
  ufs::UfsCounts c = client_ufs_->counts();
  EXPECT_EQ(c.lists, 1u);
  EXPECT_EQ(c.stats, 0u);
  // A directory larger than one listing page: the pages are walked, one LIST each, once.
  client_ufs_->Reset();
  EXPECT_TRUE(client_->Stat("/lake/huge/f10001").ok());
  EXPECT_TRUE(client_->Stat("/lake/huge/f11400").ok());
  EXPECT_TRUE(client_->Stat("/lake/huge/f11499").ok());
  EXPECT_EQ(client_->Stat("/lake/huge/f99999").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(client_ufs_->counts().lists, 2u);  // Its two pages.
  EXPECT_EQ(client_ufs_->counts().stats, 0u);
  // A name inside a page's range that the page does not hold: the source says (a directory
  // can sort differently in a listing), with a HEAD.
  client_ufs_->Reset();
  EXPECT_EQ(client_->Stat("/lake/huge/f10500x").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(client_ufs_->counts().stats, 1u);
}

// Many threads missing on siblings at once (read_many, a DataLoader worker's first batch):
// one LIST per page of the folder, not one per thread.
TEST_P(ClientTest, ConcurrentStatsOfSiblingsShareEachListing) {
  for (int i = 0; i < 2500; ++i) memory_->Put("wide/f" + std::to_string(10000 + i), "x");
  MakeClient();
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      // Names on the third page: each thread walks all three.
      if (!client_->Stat("/lake/wide/f" + std::to_string(12100 + t)).ok()) ++failures;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(client_ufs_->counts().lists, 3u);
  EXPECT_EQ(client_ufs_->counts().stats, 0u);
}

TEST_P(ClientTest, OverwrittenObjectShowsNewContentAfterTtlNeverAMix) {
  std::string v1 = RandomBytes(kPage * 2, 5), v2 = RandomBytes(kPage * 2, 6);
  memory_->Put("obj", v1);
  MakeClient();
  auto old_reader = client_->Open("/lake/obj");
  ASSERT_TRUE(old_reader.ok());
  std::string first_page(kPage, '\0');
  ASSERT_TRUE((*old_reader)->Read(0, first_page).ok());
  memory_->Put("obj", v2);
  // The open reader is pinned to v1: it returns v1 bytes or an error, never v2 bytes.
  std::string second_page(kPage, '\0');
  auto n = (*old_reader)->Read(kPage, second_page);
  if (n.ok()) {
    EXPECT_EQ(second_page, v1.substr(kPage));
  } else {
    EXPECT_EQ(n.status().code(), StatusCode::kFailedPrecondition);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(250));  // Past the 200 ms TTL.
  EXPECT_EQ(ReadAll("/lake/obj", kPage), v2);
}

TEST_P(ClientTest, CorruptPageOnDiskIsDetectedAndRefetched) {
  std::string data = RandomBytes(kPage, 8);
  memory_->Put("c.bin", data);
  MakeClient();
  ASSERT_EQ(ReadAll("/lake/c.bin", kPage), data);
  // Wait until the page is published (not a temp file still being written: a flip there could
  // be overwritten), then flip one byte of its data. Page files are named by 32 hex digits.
  for (int i = 0; i < 500 && worker_->store()->Stats().pages < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(worker_->store()->Stats().pages, 1u);
  ASSERT_TRUE(testing::FlipByteOfPageFile(dir_));
  MakeClient();  // A fresh client: nothing in its readahead buffer.
  EXPECT_EQ(ReadAll("/lake/c.bin", kPage), data);
  EXPECT_GE(client_->Stats().checksum_failures, 1u);
  EXPECT_GE(worker_->service()->Stats().checksum_failures, 1u);
}

// Failure handling of remote workers (TCP only).
class ClientTcpTest : public ClientTest {};

TEST_P(ClientTcpTest, UnreachableWorkerFallsBackToTheSource) {
  std::string data = RandomBytes(kPage * 3 + 5, 9);
  memory_->Put("f", data);
  uint16_t port = worker_->port();
  worker_.reset();  // Nothing listens there any more.
  MakeClient({"127.0.0.1:" + std::to_string(port)});
  EXPECT_EQ(ReadAll("/lake/f", 100000), data);
  EXPECT_GE(client_->Stats().fallback_bytes, data.size());
}

TEST_P(ClientTcpTest, WorkerKilledDuringReadsCausesNoReaderError) {
  std::string data = RandomBytes(kPage * 8, 10);
  memory_->Put("f", data);
  MakeClient();
  auto reader = client_->Open("/lake/f");
  ASSERT_TRUE(reader.ok());
  std::string buf(kPage / 2, '\0');
  for (uint64_t off = 0; off < data.size(); off += buf.size()) {
    if (off == kPage * 3) worker_->Stop();
    auto n = (*reader)->Read(off, buf);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    ASSERT_EQ(buf.substr(0, *n), data.substr(off, *n));
  }
}

TEST_P(ClientTest, SequentialReadsUseReadahead) {
  std::string data = RandomBytes(kPage * 8, 11);
  memory_->Put("seq", data);
  MakeClient();
  EXPECT_EQ(ReadAll("/lake/seq", 128 * 1024), data);
  EXPECT_GT(client_->Stats().buffer_hits, 8u);
}

// With unbuffered_small_files (the Python SDK), a small file read whole (a dataset sample) goes
// straight into the reader's memory, cold or warm, and byte-exact; a part of it, or a file of
// several pages, still goes through the buffer; without it, everything does.
TEST_P(ClientTest, OnePageFilesReadWholeSkipThePageBufferWhenAskedTo) {
  const std::string small = RandomBytes(kPage / 3 + 17, 13);
  memory_->Put("sample", small);
  const std::string two_pages = RandomBytes(kPage + 5, 14);
  memory_->Put("two", two_pages);
  MakeClient({}, /*unbuffered_small_files=*/true);
  for (int round = 0; round < 2; ++round) {  // Cold (from the source), then warm (cached).
    auto reader = client_->Open("/lake/sample");
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    std::string out(small.size() + 100, '\0');  // Larger than the file, as readinto's may be.
    auto n = (*reader)->Read(0, out);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    ASSERT_EQ(*n, small.size());
    EXPECT_EQ(out.substr(0, *n), small);
    for (int i = 0; i < 500 && worker_->store()->Stats().pages < 1; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  EXPECT_EQ(client_->Stats().unbuffered_reads, 2u);
  EXPECT_EQ(client_->Stats().buffer_hits, 0u);

  EXPECT_EQ(ReadAll("/lake/sample", 1000), small);  // In pieces: the buffer serves the rest.
  EXPECT_GT(client_->Stats().buffer_hits, 0u);
  EXPECT_EQ(ReadAll("/lake/two", 2 * kPage), two_pages);
  EXPECT_EQ(client_->Stats().unbuffered_reads, 2u);

  MakeClient();  // A FUSE daemon's client.
  EXPECT_EQ(ReadAll("/lake/sample", kPage), small);
  EXPECT_EQ(ReadAll("/lake/sample", kPage), small);
  EXPECT_EQ(client_->Stats().unbuffered_reads, 0u);
  EXPECT_EQ(client_->Stats().buffer_hits, 2u);
}

TEST_P(ClientTcpTest, ShortCircuitServesCachedPagesWithoutAskingTheWorker) {
  std::string data = RandomBytes(kPage * 3, 12);
  memory_->Put("sc", data);
  MakeClient();
  EXPECT_EQ(ReadAll("/lake/sc", kPage), data);  // Cold: fills the worker's cache.
  for (int i = 0; i < 500 && worker_->store()->Stats().pages < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  MakeClient();  // Empty readahead buffer.
  uint64_t requests = worker_->service()->Stats().requests;
  EXPECT_EQ(ReadAll("/lake/sc", kPage), data);
  if (GetParam().short_circuit) {
    EXPECT_EQ(worker_->service()->Stats().requests, requests);
    EXPECT_GE(client_->Stats().short_circuit_reads, 3u);
  } else {
    EXPECT_GT(worker_->service()->Stats().requests, requests);
    EXPECT_EQ(client_->Stats().short_circuit_reads, 0u);
  }
}

std::string ModeName(const ::testing::TestParamInfo<Mode>& info) {
  if (!info.param.tcp) return "InProcess";
  return info.param.short_circuit ? "TcpShortCircuit" : "Tcp";
}

INSTANTIATE_TEST_SUITE_P(Tcp, ClientTcpTest, ::testing::Values(Mode{true, false}, Mode{true, true}),
                         ModeName);
INSTANTIATE_TEST_SUITE_P(Transports, ClientTest,
                         ::testing::Values(Mode{false}, Mode{true, false}, Mode{true, true}),
                         ModeName);

}  // namespace
}  // namespace cairn::client
