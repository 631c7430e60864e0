// The page service over TLS: a real Worker with a node certificate from a test CA, clients
// dialling with and without certificates, and plaintext in both directions; and the
// authorization of each request by principal (certificate or token) under a policy.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "auth/token.h"
#include "common/checksum.h"
#include "common/file_util.h"
#include "testing/frames.h"
#include "testing/test_pki.h"
#include "testing/test_util.h"
#include "tls/tls_context.h"
#include "transport/remote_channel.h"
#include "ufs/memory_ufs.h"
#include "worker/worker.h"

namespace cairn::worker {
namespace {

using std::chrono::milliseconds;

constexpr uint32_t kPage = 1 << 20;

class ServerTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    memory_ = std::make_shared<ufs::MemoryUnderStorage>("mem://lake");
    content_ = testing::RandomBytes(kPage + 4096, 11);
    memory_->Put("file.bin", content_);
    node_ = pki_.Node("worker-1");
  }

  Status StartWorker(bool tls, const std::string& listen = "127.0.0.1:0",
                     const std::string& plaintext_reason = "",
                     std::vector<std::string> token_public_keys = {}) {
    WorkerOptions o;
    o.config.token_public_keys = std::move(token_public_keys);
    MountSpec spec;
    spec.path = "/lake";
    spec.uri = "mem://lake";
    spec.read_only = !writable_;
    o.mounts = {spec};
    o.ufs_override = {memory_};
    o.config.listen = listen;
    o.config.metrics_listen = "";
    o.config.insecure_plaintext = plaintext_reason;
    o.config.cache_dirs.push_back({cache_.str(), 64ull << 20});
    if (tls) o.tls = {pki_.ca_file(), node_.cert, node_.key};
    auto w = Worker::Start(o);
    if (!w.ok()) return w.status();
    worker_ = std::move(w).value();
    return Status::Ok();
  }

  std::string Address() const { return "127.0.0.1:" + std::to_string(worker_->port()); }

  // A channel to the worker; `tls` null: plaintext.
  std::unique_ptr<transport::RemoteChannel> Channel(std::shared_ptr<tls::TlsContext> tls,
                                                    std::string token = "") {
    transport::RemoteChannelOptions ro;
    ro.token = std::move(token);
    ro.address = Address();
    ro.page_size = kPage;
    ro.short_circuit = false;
    ro.connect_timeout = milliseconds(3000);
    if (tls != nullptr) {
      ro.connect = [tls](const std::string& address, milliseconds timeout) {
        return tls::Dial(tls.get(), address, timeout);
      };
    }
    return std::make_unique<transport::RemoteChannel>(ro);
  }

  std::shared_ptr<tls::TlsContext> ClientTls(const testing::TestPki::Files* files) {
    tls::TlsOptions o;
    o.ca_file = pki_.ca_file();
    if (files != nullptr) {
      o.cert_file = files->cert;
      o.key_file = files->key;
    }
    auto ctx = tls::TlsContext::Create(tls::TlsContext::Role::kClient, o);
    EXPECT_TRUE(ctx.ok()) << ctx.status().ToString();
    return *ctx;
  }

  StatusOr<protocol::PageReply> Read(transport::RemoteChannel* channel, uint64_t page,
                                     std::string* out) {
    protocol::ReadPageRequest r;
    r.page.page_size = kPage;
    r.page.mount = "/lake";
    r.page.key = "file.bin";
    r.page.version = memory_->Stat("file.bin")->version;
    r.page.object_size = content_.size();
    r.page.page_index = page;
    r.offset = 0;
    r.length = page == 0 ? kPage : 4096;
    const uint32_t page_length = page == 0 ? kPage : 4096;  // The last page is short.
    out->assign(protocol::AlignedRange(0, r.length, page_length).size(), '\0');
    std::promise<StatusOr<protocol::PageReply>> done;
    channel->Call(r, *out, [&done](StatusOr<protocol::PageReply> reply) {
      done.set_value(std::move(reply));
    });
    return done.get_future().get();
  }

  // Sends `request` (a control request, or a page request without a destination buffer).
  static Status Call(transport::RemoteChannel* channel, protocol::Request request) {
    std::string out(kPage, '\0');
    std::promise<Status> done;
    channel->Call(request, protocol::WantsData(request) ? std::span<char>(out) : std::span<char>(),
                  [&done](StatusOr<protocol::PageReply> reply) { done.set_value(reply.status()); });
    return done.get_future().get();
  }

  template <typename R>
  R About(std::string key = "file.bin") {
    R r;
    r.page.page_size = kPage;
    r.page.mount = "/lake";
    r.page.key = std::move(key);
    r.page.version = memory_->Stat("file.bin")->version;
    r.page.object_size = content_.size();
    r.page.page_index = 0;
    return r;
  }

  // Sends a Hello without a token on `stream` and decodes the worker's reply.
  static StatusOr<protocol::HelloReply> Hello(net::Stream* stream) {
    CAIRN_RETURN_IF_ERROR(testing::SendFrame(stream, protocol::MessageType::kHello, 1,
                                             protocol::EncodeHelloRequest({})));
    CAIRN_ASSIGN_OR_RETURN(auto frame, testing::ReadFrame(stream));
    return protocol::DecodeHelloReply(frame.second);
  }

  // The value of an unlabelled series, as scraped.
  uint64_t Counter(const std::string& name) {
    const std::string text = worker_->registry()->ExposeText();
    size_t at = text.find("\n" + name + " ");
    if (at == std::string::npos) return ~uint64_t{0};
    return std::stoull(text.substr(at + name.size() + 2));
  }

  bool writable_ = false;  // Start the mount write-through.
  testing::TempDir cache_{"cache"};
  testing::TestPki pki_;
  testing::TestPki::Files node_;
  std::string content_;
  std::shared_ptr<ufs::MemoryUnderStorage> memory_;
  std::unique_ptr<Worker> worker_;
};

TEST_F(ServerTlsTest, AClientWithACertificateReadsExactBytesMissAndHit) {
  ASSERT_TRUE(StartWorker(/*tls=*/true).ok());
  testing::TestPki::Files team = pki_.ClientCert("team-a");
  auto channel = Channel(ClientTls(&team));
  std::string bytes;
  for (int round = 0; round < 2; ++round) {  // A miss, then (once stored) hits via SendFile.
    for (uint64_t page = 0; page < 2; ++page) {
      auto reply = Read(channel.get(), page, &bytes);
      ASSERT_TRUE(reply.ok()) << reply.status().ToString();
      ASSERT_EQ(reply->data_length, page == 0 ? kPage : 4096u);
      EXPECT_TRUE(std::string_view(bytes).substr(0, reply->data_length) ==
                  std::string_view(content_).substr(page * kPage, reply->data_length));
      EXPECT_EQ(ChunkChecksums(std::string_view(bytes).substr(0, reply->data_length)),
                reply->checksums);
    }
    for (int i = 0; i < 200 && worker_->store()->Stats().pages < 2; ++i) {
      std::this_thread::sleep_for(milliseconds(5));
    }
  }
}

TEST_F(ServerTlsTest, PlaintextClientsAndClientsWithoutACertificateAreRefusedWithTheReason) {
  ASSERT_TRUE(StartWorker(/*tls=*/true).ok());
  std::string bytes;
  auto plain = Read(Channel(nullptr).get(), 0, &bytes);
  EXPECT_EQ(plain.status().code(), StatusCode::kUnavailable) << plain.status().ToString();
  EXPECT_NE(plain.status().message().find("requires TLS"), std::string::npos)
      << plain.status().ToString();

  auto anonymous = Read(Channel(ClientTls(nullptr)).get(), 0, &bytes);
  EXPECT_FALSE(anonymous.ok());
  EXPECT_NE(anonymous.status().message().find("certificate"), std::string::npos)
      << anonymous.status().ToString();

  testing::TestPki stranger("stranger-ca");
  testing::TestPki::Files foreign = stranger.ClientCert("team-x");
  auto foreign_ctx = tls::TlsContext::Create(tls::TlsContext::Role::kClient, pki_.Options(foreign));
  ASSERT_TRUE(foreign_ctx.ok());
  EXPECT_FALSE(Read(Channel(*foreign_ctx).get(), 0, &bytes).ok());

  // The server counts a refusal after it sends it: the client may see it first.
  EXPECT_TRUE(testing::WaitUntil([&] { return worker_->server_stats().tls_refused >= 3; }))
      << worker_->server_stats().tls_refused;
  EXPECT_EQ(worker_->server_stats().tls_refused, 3u);
  EXPECT_EQ(worker_->store()->Stats().pages, 0u) << "nothing was served to a refused client";
}

TEST_F(ServerTlsTest, ATlsClientOfAPlaintextWorkerIsToldSo) {
  ASSERT_TRUE(StartWorker(/*tls=*/false).ok());
  testing::TestPki::Files team = pki_.ClientCert("team-a");
  std::string bytes;
  auto reply = Read(Channel(ClientTls(&team)).get(), 0, &bytes);
  EXPECT_EQ(reply.status().code(), StatusCode::kUnavailable) << reply.status().ToString();
  EXPECT_NE(reply.status().message().find("plaintext"), std::string::npos)
      << reply.status().ToString();
}

TEST_F(ServerTlsTest, PlaintextBeyondLoopbackNeedsAStatedReason) {
  Status refused = StartWorker(/*tls=*/false, "0.0.0.0:0");
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("--insecure-plaintext"), std::string::npos)
      << refused.ToString();
  EXPECT_TRUE(StartWorker(/*tls=*/false, "0.0.0.0:0", "isolated benchmark network").ok());
  worker_.reset();
  EXPECT_TRUE(StartWorker(/*tls=*/true, "0.0.0.0:0").ok());
}

TEST_F(ServerTlsTest, HelloNamesCacheFoldersOnlyToClientsOnThisMachine) {
  // Over loopback (this machine) a Hello carries the folders for short-circuit reads; the
  // stream says whether the peer is local (a remote peer cannot be made in a unit test: see
  // PeerOnThisHost in net/stream.h).
  ASSERT_TRUE(StartWorker(/*tls=*/true).ok());
  testing::TestPki::Files team = pki_.ClientCert("team-a");
  auto tls = ClientTls(&team);
  auto stream = tls::Dial(tls.get(), Address(), milliseconds(3000));
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  EXPECT_TRUE((*stream)->PeerOnThisHost());
  EXPECT_EQ((*stream)->PeerPrincipal(), "worker-1");
  auto decoded = Hello(stream->get());
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->cache_dirs.size(), 1u);
}

// ------------------------------------------------------------------------------------------
// Authorization (docs/security.md): the worker checks every request against the policy.

constexpr auth::AccessSet kRead = static_cast<auth::AccessSet>(auth::Access::kRead);
constexpr auth::AccessSet kAdmin = static_cast<auth::AccessSet>(auth::Access::kAdmin);

TEST_F(ServerTlsTest, ThePolicyDecidesEachRequestByPrincipalAndPath) {
  ASSERT_TRUE(StartWorker(/*tls=*/true).ok());
  worker_->authorizer()->SetPolicy({true,
                                    {{"team-a", "/lake/file.bin", kRead},
                                     {"ops", "/lake", kAdmin},
                                     {"team-b", "/lake/file", kRead | kAdmin}}});
  testing::TestPki::Files a = pki_.ClientCert("team-a"), b = pki_.ClientCert("team-b"),
                          ops = pki_.ClientCert("ops");
  auto team_a = Channel(ClientTls(&a)), team_b = Channel(ClientTls(&b)),
       admin = Channel(ClientTls(&ops));
  std::string bytes;
  auto read = Read(team_a.get(), 0, &bytes);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(std::string_view(bytes).substr(0, kPage) ==
              std::string_view(content_).substr(0, kPage));

  // "/lake/file" does not cover "/lake/file.bin": team-b gets nothing, not even a probe.
  auto denied = Read(team_b.get(), 0, &bytes);
  EXPECT_EQ(denied.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(denied.status().message(),
            "principal 'team-b' (certificate) has no read grant on /lake/file.bin");
  EXPECT_EQ(Call(team_b.get(), About<protocol::ProbePageRequest>()).code(),
            StatusCode::kPermissionDenied);

  // Load and drop need admin; read does not give it, and admin does not give read.
  EXPECT_EQ(Call(team_a.get(), About<protocol::LoadPageRequest>()).code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(Call(team_a.get(), About<protocol::DropPageRequest>()).code(),
            StatusCode::kPermissionDenied);
  EXPECT_TRUE(Call(admin.get(), About<protocol::LoadPageRequest>()).ok());
  EXPECT_EQ(Read(admin.get(), 0, &bytes).status().code(), StatusCode::kPermissionDenied);

  // Worker-to-worker requests: only for a node certificate, whatever the grants say.
  EXPECT_EQ(Call(admin.get(), About<protocol::PeerReadRequest>()).code(),
            StatusCode::kPermissionDenied);
  testing::TestPki::Files peer = pki_.Node("worker-2");
  EXPECT_TRUE(Call(Channel(ClientTls(&peer)).get(), About<protocol::PeerReadRequest>()).ok());

  // A key that walks out of its path cannot borrow a grant.
  EXPECT_EQ(Call(team_a.get(), About<protocol::ProbePageRequest>("file.bin/../other")).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Counter("cairn_worker_requests_denied_total"), 7u);

  // Short-circuit reads would bypass the checks: no cache folders in Hello under a policy.
  auto stream = tls::Dial(ClientTls(&a).get(), Address(), milliseconds(3000));
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  auto decoded = Hello(stream->get());
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_TRUE(decoded->cache_dirs.empty());
  EXPECT_TRUE(decoded->instance_token.empty());
  EXPECT_EQ(decoded->principal, "team-a");

  // Disabled: everyone may do everything again.
  worker_->authorizer()->SetPolicy({});
  EXPECT_TRUE(Read(team_b.get(), 0, &bytes).ok());
}

// StatPath and ListDir through a worker: the worker's source, the caller's grants.
TEST_F(ServerTlsTest, MetadataComesFromTheWorkerAndShowsOnlyWhatTheGrantsAllow) {
  memory_->Put("team-a/x.bin", "xx");
  memory_->Put("team-a/sub/y.bin", "yyy");
  memory_->Put("team-a2/secret.bin", "s");  // A look-alike of team-a's name.
  memory_->Put("team-b/z.bin", "z");
  for (int i = 0; i < 5; ++i) memory_->Put("team-a/many/f" + std::to_string(i), "f");
  ASSERT_TRUE(StartWorker(/*tls=*/true).ok());
  testing::TestPki::Files a = pki_.ClientCert("team-a"), b = pki_.ClientCert("team-b");
  auto team_a = Channel(ClientTls(&a)), team_b = Channel(ClientTls(&b));
  auto ask = [](transport::RemoteChannel* channel, protocol::MetadataRequest request) {
    std::promise<StatusOr<protocol::MetadataReply>> done;
    channel->CallMetadata(request, [&done](StatusOr<protocol::MetadataReply> reply) {
      done.set_value(std::move(reply));
    });
    return done.get_future().get();
  };
  auto names = [](const protocol::MetadataReply& reply) {
    std::vector<std::string> out;
    for (const auto& e : reply.entries) out.push_back(e.name + (e.is_dir ? "/" : ""));
    return out;
  };
  auto list = [&](transport::RemoteChannel* channel, std::string path, std::string token = "",
                  uint32_t max = protocol::kMaxListEntries) {
    return ask(channel, protocol::ListDirRequest{0, std::move(path), std::move(token), max});
  };

  // No policy: the whole source.
  auto all = list(team_b.get(), "/lake");
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(names(*all), (std::vector<std::string>{"file.bin", "team-a/", "team-a2/", "team-b/"}));
  auto stat = ask(team_a.get(), protocol::StatPathRequest{0, "/lake/team-a/x.bin"});
  ASSERT_TRUE(stat.ok()) << stat.status().ToString();
  ASSERT_EQ(stat->entries.size(), 1u);
  EXPECT_EQ(stat->entries[0].size, 2u);
  EXPECT_EQ(stat->entries[0].version, memory_->Stat("team-a/x.bin")->version);
  EXPECT_EQ(ask(team_a.get(), protocol::StatPathRequest{0, "/lake/nothing"}).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(list(team_a.get(), "/lake/file.bin").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(list(team_a.get(), "/lake/team-a/../team-b").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(list(team_a.get(), "/elsewhere").status().code(), StatusCode::kUnavailable);
  auto root = list(team_a.get(), "/");  // Above the mounts.
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  EXPECT_EQ(names(*root), (std::vector<std::string>{"lake/"}));

  // Pages: continue with the token until it is empty.
  std::vector<std::string> paged;
  std::string token;
  int pages = 0;
  do {
    auto page = list(team_a.get(), "/lake/team-a/many", token, 2);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    for (auto& n : names(*page)) paged.push_back(n);
    token = page->next_token;
    ASSERT_LT(++pages, 10);
  } while (!token.empty());
  EXPECT_EQ(paged, (std::vector<std::string>{"f0", "f1", "f2", "f3", "f4"}));

  worker_->authorizer()->SetPolicy({true, {{"team-a", "/lake/team-a", kRead}}});
  auto filtered = list(team_a.get(), "/lake");
  ASSERT_TRUE(filtered.ok()) << filtered.status().ToString();
  EXPECT_EQ(names(*filtered), (std::vector<std::string>{"team-a/"}));
  auto inside = list(team_a.get(), "/lake/team-a");
  ASSERT_TRUE(inside.ok()) << inside.status().ToString();
  EXPECT_EQ(names(*inside), (std::vector<std::string>{"many/", "sub/", "x.bin"}));
  // On the way down: a directory, nothing more. Inside the grant: the object.
  auto mount_root = ask(team_a.get(), protocol::StatPathRequest{0, "/lake"});
  ASSERT_TRUE(mount_root.ok()) << mount_root.status().ToString();
  EXPECT_TRUE(mount_root->entries.at(0).is_dir);
  EXPECT_EQ(ask(team_a.get(), protocol::StatPathRequest{0, "/lake/team-a/x.bin"})
                .value()
                .entries.at(0)
                .size,
            2u);
  // Outside the grant: refused, look-alikes included, and for team-b everything.
  EXPECT_EQ(ask(team_a.get(), protocol::StatPathRequest{0, "/lake/file.bin"}).status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(list(team_a.get(), "/lake/team-a2").status().code(), StatusCode::kPermissionDenied);
  auto refused = list(team_b.get(), "/lake");
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(refused.status().message(),
            "principal 'team-b' (certificate) has no read grant on /lake or below it");
  EXPECT_EQ(list(team_b.get(), "/").status().code(), StatusCode::kPermissionDenied);
}

TEST_F(ServerTlsTest, WritesNeedTheWriteGrantAndAHandleServesOnlyItsPrincipal) {
  constexpr auth::AccessSet kWrite = static_cast<auth::AccessSet>(auth::Access::kWrite);
  writable_ = true;
  ASSERT_TRUE(StartWorker(/*tls=*/true).ok());
  testing::TestPki::Files a = pki_.ClientCert("team-a"), b = pki_.ClientCert("team-b");
  auto team_a = Channel(ClientTls(&a)), team_b = Channel(ClientTls(&b));
  auto send = [](transport::RemoteChannel* channel, protocol::WriteRequest request) {
    std::promise<StatusOr<protocol::WriteReply>> done;
    channel->CallWrite(request, [&done](StatusOr<protocol::WriteReply> reply) {
      done.set_value(std::move(reply));
    });
    return done.get_future().get();
  };
  auto open = [](std::string path) {
    protocol::OpenWriteRequest r;
    r.path = std::move(path);
    r.create = true;
    r.truncate = true;
    return r;
  };
  const auth::Policy writers{
      true, {{"team-a", "/lake/team-a", kRead | kWrite}, {"team-b", "/lake", kRead}}};
  worker_->authorizer()->SetPolicy(writers);

  // Read is not write; a grant does not reach its look-alikes; paths must be plain.
  EXPECT_EQ(send(team_b.get(), open("/lake/team-a/ckpt.pt")).status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(
      send(team_b.get(), protocol::RemovePathRequest{0, "/lake/file.bin", false}).status().code(),
      StatusCode::kPermissionDenied);
  EXPECT_EQ(send(team_a.get(), open("/lake/team-a2/x")).status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(send(team_a.get(), open("/lake/team-a/../file.bin")).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(memory_->Stat("file.bin").ok());
  // Waiting for write-back uploads (SyncPath) is a write request too: the write grant.
  EXPECT_EQ(send(team_b.get(), protocol::SyncPathRequest{1000, "/lake/team-a"}).status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_TRUE(send(team_a.get(), protocol::SyncPathRequest{1000, "/lake/team-a"}).ok());

  auto opened = send(team_a.get(), open("/lake/team-a/ckpt.pt"));
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  const std::string data = testing::RandomBytes(3 << 20, 5);  // A frame far past 64 KiB.
  protocol::WritePageRequest w;
  w.handle = opened->handle;
  w.data = std::span<const char>(data.data(), data.size());
  w.checksums = ChunkChecksums(w.data);
  auto written = send(team_a.get(), w);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(written->size, data.size());
  // Another principal cannot use the handle: to it, there is none.
  EXPECT_EQ(send(team_b.get(), protocol::CloseWriteRequest{0, opened->handle}).status().code(),
            StatusCode::kNotFound);
  // Reading back what the handle wrote (ReadWritten) needs the read grant on its path: a
  // write-only principal cannot read an object through an open without truncate.
  auto read_back = send(team_a.get(), protocol::ReadWrittenRequest{0, opened->handle, 1, 4096});
  ASSERT_TRUE(read_back.ok()) << read_back.status().ToString();
  EXPECT_EQ(read_back->data, data.substr(1, 4096));
  EXPECT_EQ(
      send(team_b.get(), protocol::ReadWrittenRequest{0, opened->handle, 0, 1}).status().code(),
      StatusCode::kNotFound);
  worker_->authorizer()->SetPolicy({true, {{"team-a", "/lake/team-a", kWrite}}});
  EXPECT_EQ(
      send(team_a.get(), protocol::ReadWrittenRequest{0, opened->handle, 0, 1}).status().code(),
      StatusCode::kPermissionDenied);
  // A grant revoked before the commit stops it; given back, the commit goes through.
  worker_->authorizer()->SetPolicy({true, {{"team-a", "/lake/team-a", kRead}}});
  EXPECT_EQ(send(team_a.get(), protocol::CloseWriteRequest{0, opened->handle}).status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(memory_->Stat("team-a/ckpt.pt").status().code(), StatusCode::kNotFound);
  worker_->authorizer()->SetPolicy(writers);
  auto closed = send(team_a.get(), protocol::CloseWriteRequest{0, opened->handle});
  ASSERT_TRUE(closed.ok()) << closed.status().ToString();
  EXPECT_EQ(closed->version, memory_->Stat("team-a/ckpt.pt")->version);
  EXPECT_EQ(memory_->Get("team-a/ckpt.pt"), data);
}

TEST_F(ServerTlsTest, NamespaceChangesNeedTheWriteGrantOnEveryPathTheyChange) {
  constexpr auth::AccessSet kWrite = static_cast<auth::AccessSet>(auth::Access::kWrite);
  writable_ = true;
  ASSERT_TRUE(StartWorker(/*tls=*/true).ok());
  testing::TestPki::Files a = pki_.ClientCert("team-a");
  auto team_a = Channel(ClientTls(&a));
  auto send = [](transport::RemoteChannel* channel, protocol::WriteRequest request) {
    std::promise<StatusOr<protocol::WriteReply>> done;
    channel->CallWrite(request, [&done](StatusOr<protocol::WriteReply> reply) {
      done.set_value(std::move(reply));
    });
    return done.get_future().get();
  };
  worker_->authorizer()->SetPolicy(
      {true, {{"team-a", "/lake/team-a", kRead | kWrite}, {"team-a", "/lake", kRead}}});
  ASSERT_TRUE(memory_->Write("team-a/ckpt.tmp", std::span<const char>("weights", 7)).ok());
  // A rename out of the writable prefix, or into it from a read-only one, changes a path the
  // principal may only read.
  EXPECT_EQ(
      send(team_a.get(), protocol::RenameRequest{0, "/lake/team-a/ckpt.tmp", "/lake/ckpt", false})
          .status()
          .code(),
      StatusCode::kPermissionDenied);
  EXPECT_EQ(
      send(team_a.get(), protocol::RenameRequest{0, "/lake/file.bin", "/lake/team-a/stolen", false})
          .status()
          .code(),
      StatusCode::kPermissionDenied);
  EXPECT_EQ(send(team_a.get(), protocol::MakeDirRequest{0, "/lake/runs"}).status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(send(team_a.get(), protocol::RemovePathRequest{0, "/lake/dir", true}).status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_TRUE(memory_->Stat("team-a/ckpt.tmp").ok());
  EXPECT_TRUE(memory_->Stat("file.bin").ok());

  auto moved = send(team_a.get(),
                    protocol::RenameRequest{0, "/lake/team-a/ckpt.tmp", "/lake/team-a/ckpt", true});
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(moved->size, 7u);
  EXPECT_EQ(moved->version, memory_->Stat("team-a/ckpt")->version);
  EXPECT_TRUE(send(team_a.get(), protocol::MakeDirRequest{0, "/lake/team-a/runs"}).ok());
  EXPECT_TRUE(send(team_a.get(), protocol::RemovePathRequest{0, "/lake/team-a/runs", true}).ok());
}

TEST_F(ServerTlsTest, ATokenNamesThePrincipalAndABadOneIsRefusedAtHello) {
  auto keys = auth::GenerateTokenKey();
  ASSERT_TRUE(keys.ok());
  const std::string pub = cache_.str() + "/../token.pub";
  ASSERT_TRUE(WriteNewFile(pub, keys->public_key, 0644, true).ok());
  ASSERT_TRUE(StartWorker(/*tls=*/true, "127.0.0.1:0", "", {pub}).ok());
  worker_->authorizer()->SetPolicy({true, {{"job-7", "/lake", kRead}}});
  auto signer = auth::TokenSigner::FromPrivateKeyPem(keys->private_key);
  ASSERT_TRUE(signer.ok());
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  std::string token = *signer->Sign({"job-7", now, now + 600, ""});
  std::string expired = *signer->Sign({"job-7", now - 7200, now - 3600, ""});

  // With token keys the client certificate is optional: CA + token is enough.
  std::string bytes;
  auto read = Read(Channel(ClientTls(nullptr), token).get(), 0, &bytes);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  // The token wins over the certificate's principal.
  testing::TestPki::Files other = pki_.ClientCert("team-z");
  EXPECT_TRUE(Read(Channel(ClientTls(&other), token).get(), 0, &bytes).ok());
  EXPECT_EQ(Read(Channel(ClientTls(&other)).get(), 0, &bytes).status().code(),
            StatusCode::kPermissionDenied);
  // No certificate and no token: anonymous, and granted nothing.
  EXPECT_EQ(Read(Channel(ClientTls(nullptr)).get(), 0, &bytes).status().message(),
            "an anonymous client has no read grant on /lake/file.bin");

  auto refused = Read(Channel(ClientTls(nullptr), expired).get(), 0, &bytes);
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(refused.status().message().find("refused the token"), std::string::npos)
      << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("expired"), std::string::npos);
  std::string forged_token = token;  // One signature character changed.
  char& c = forged_token[forged_token.size() - 10];
  c = c == 'B' ? 'C' : 'B';
  auto forged = Read(Channel(ClientTls(nullptr), forged_token).get(), 0, &bytes);
  EXPECT_EQ(forged.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(Counter("cairn_worker_tokens_refused_total"), 2u);
}

TEST_F(ServerTlsTest, AWorkerWithoutTokenKeysRefusesTokens) {
  ASSERT_TRUE(StartWorker(/*tls=*/true).ok());
  testing::TestPki::Files a = pki_.ClientCert("team-a");
  std::string bytes;
  auto reply = Read(Channel(ClientTls(&a), "cairn1.x.y").get(), 0, &bytes);
  EXPECT_EQ(reply.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(reply.status().message().find("--token-public-key"), std::string::npos)
      << reply.status().ToString();
}

}  // namespace
}  // namespace cairn::worker
