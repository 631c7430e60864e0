// TLS over real loopback TCP with certificates from a real private CA (testing::TestPki).
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <future>
#include <thread>

#include "net/stream.h"
#include "testing/test_pki.h"
#include "testing/test_util.h"
#include "tls/tls_context.h"

namespace cairn::tls {
namespace {

using std::chrono::milliseconds;
using testing::TestPki;

std::span<const char> Span(const std::string& s) { return {s.data(), s.size()}; }

Status WriteString(net::Stream* s, const std::string& text) {
  std::array<std::span<const char>, 1> bufs{Span(text)};
  return s->WriteAll(bufs);
}

StatusOr<std::string> ReadString(net::Stream* s, size_t n) {
  std::string out(n, '\0');
  CAIRN_RETURN_IF_ERROR(s->ReadFull(out));
  return out;
}

// A listener on loopback; each test accepts and dials what it needs.
class TlsStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto l = net::Listener::Bind("127.0.0.1", 0);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    listener_ = std::move(l).value();
    address_ = "127.0.0.1:" + std::to_string(listener_->port());
  }

  std::shared_ptr<TlsContext> Server(const TlsOptions& o) {
    auto ctx = TlsContext::Create(TlsContext::Role::kServer, o);
    EXPECT_TRUE(ctx.ok()) << ctx.status().ToString();
    return ctx.ok() ? *ctx : nullptr;
  }
  std::shared_ptr<TlsContext> Client(const TlsOptions& o) {
    auto ctx = TlsContext::Create(TlsContext::Role::kClient, o);
    EXPECT_TRUE(ctx.ok()) << ctx.status().ToString();
    return ctx.ok() ? *ctx : nullptr;
  }

  // Both ends of one mutual-TLS connection: a worker's node certificate and a client's.
  struct Connection {
    std::unique_ptr<net::Stream> server, client;
  };
  Connection Connect(const testing::TestPki& pki, const testing::TestPki::Files& node,
                     const testing::TestPki::Files& client_cert) {
    auto server = Server(pki.Options(node));
    auto client = Client(pki.Options(client_cert));
    auto accepted = AcceptOne(server);
    auto dialled = Dial(client.get(), address_, milliseconds(3000));
    EXPECT_TRUE(dialled.ok()) << dialled.status().ToString();
    Connection c;
    c.server = accepted.get();
    if (dialled.ok()) c.client = std::move(dialled).value();
    return c;
  }

  // Accepts one connection on a thread, wraps it with `server` and runs the server's side of
  // the handshake (a zero-byte read), whose result lands in `*handshake` when given.
  std::future<std::unique_ptr<net::Stream>> AcceptOne(std::shared_ptr<TlsContext> server,
                                                      Status* handshake = nullptr,
                                                      milliseconds timeout = milliseconds(5000)) {
    return std::async(std::launch::async,
                      [this, server, handshake, timeout]() -> std::unique_ptr<net::Stream> {
                        auto tcp = listener_->Accept();
                        if (!tcp.ok()) return nullptr;
                        std::unique_ptr<net::Stream> s = std::move(tcp).value();
                        s->SetReadTimeout(timeout);
                        s->SetWriteTimeout(timeout);
                        if (server == nullptr) return s;
                        auto wrapped = std::move(server->WrapAccepted(std::move(s))).value();
                        wrapped->SetReadTimeout(timeout);
                        wrapped->SetWriteTimeout(timeout);
                        Status h = wrapped->ReadFull({});
                        if (handshake != nullptr) *handshake = h;
                        return wrapped;
                      });
  }

  // Dials with `client` while the server side reads `probe` bytes; returns the client's
  // status and, through `server_status`, what the server's first read said.
  Status Handshake(std::shared_ptr<TlsContext> server, std::shared_ptr<TlsContext> client,
                   Status* server_status, std::string host = "127.0.0.1") {
    Status server_handshake;
    auto accepted = AcceptOne(server, &server_handshake);
    auto tcp = net::ConnectTcp(address_, milliseconds(2000));
    EXPECT_TRUE(tcp.ok());
    auto dialled = client->Connect(std::move(tcp).value(), host, milliseconds(3000));
    std::unique_ptr<net::Stream> srv = accepted.get();
    Status client_status = dialled.status();
    if (!server_handshake.ok()) {
      *server_status = server_handshake;
      srv->Shutdown();
      if (dialled.ok()) {
        // TLS 1.3 finishes the client's handshake before the server checks the client's
        // certificate: the refusal reaches the client on its first read.
        client_status = ReadString(dialled->get(), 4).status();
      }
      return client_status;
    }
    if (dialled.ok()) {
      // TLS 1.3 finishes the client's handshake before the server checks the client's
      // certificate: a refusal reaches the client on its first read.
      Status w = WriteString(dialled->get(), "ping");
      *server_status = ReadString(srv.get(), 4).status();
      if (server_status->ok()) {
        EXPECT_TRUE(WriteString(srv.get(), "pong").ok());
      } else {
        srv->Shutdown();
      }
      if (w.ok()) client_status = ReadString(dialled->get(), 4).status();
    } else {
      srv->Shutdown();
      *server_status = ReadString(srv.get(), 1).status();
    }
    return client_status;
  }

  std::unique_ptr<net::Listener> listener_;
  std::string address_;
};

TEST_F(TlsStreamTest, MutualTlsCarriesBytesBothWaysAndNamesEachPeer) {
  TestPki pki;
  Connection c = Connect(pki, pki.Node("worker-1"), pki.ClientCert("team-a"));
  ASSERT_NE(c.server, nullptr);
  ASSERT_NE(c.client, nullptr);
  std::unique_ptr<net::Stream>& srv = c.server;
  net::Stream* cli = c.client.get();

  // Gathered writes: a small header, a large body, a small trailer, as frames are sent.
  const std::string header = "HDR:", body = testing::RandomBytes(3 << 20, 1), tail = "END";
  std::array<std::span<const char>, 3> bufs{Span(header), Span(body), Span(tail)};
  auto sent = std::async(std::launch::async, [&] { return cli->WriteAll(bufs); });
  auto got = ReadString(srv.get(), header.size() + body.size() + tail.size());
  ASSERT_TRUE(sent.get().ok());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(*got == header + body + tail);
  EXPECT_EQ(srv->PeerPrincipal(), "team-a");
  EXPECT_EQ(cli->PeerPrincipal(), "worker-1");
  // A client certificate is not a cluster member's; a node certificate is.
  EXPECT_FALSE(srv->PeerIsClusterNode());
  EXPECT_TRUE(cli->PeerIsClusterNode());
  EXPECT_TRUE(srv->Encrypted() && cli->Encrypted());

  // SendFile goes through TLS (no kernel sendfile): a range of a file, byte-exact.
  testing::TempDir dir;
  const std::string file = dir.str() + "/page", content = testing::RandomBytes(1 << 20, 2);
  testing::WriteFileAtomically(file, content);
  int fd = open(file.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  // With a small head (shares the file's first record), a head over the gather size (records
  // of its own), no head, and no file bytes.
  const std::string small_head = "frame+meta", big_head = testing::RandomBytes(40000, 5);
  const std::array<std::span<const char>, 1> small{std::span<const char>(small_head)};
  const std::array<std::span<const char>, 2> big{std::span<const char>(big_head),
                                                 std::span<const char>(small_head)};
  auto sent_file = std::async(std::launch::async, [&] {
    Status s = srv->SendFile(small, fd, 1000, 700000);
    if (s.ok()) s = srv->SendFile(big, fd, 5, 4096);
    if (s.ok()) s = srv->SendFile({}, fd, 0, 10);
    if (s.ok()) s = srv->SendFile(small, fd, 0, 0);
    return s;
  });
  const std::string expected = small_head + content.substr(1000, 700000) + big_head + small_head +
                               content.substr(5, 4096) + content.substr(0, 10) + small_head;
  auto file_bytes = ReadString(cli, expected.size());
  EXPECT_TRUE(sent_file.get().ok());
  ASSERT_TRUE(file_bytes.ok());
  EXPECT_TRUE(*file_bytes == expected);
  // A file shorter than the range: IoError (the caller closes the stream).
  EXPECT_EQ(srv->SendFile(small, fd, content.size() - 10, 20).code(), StatusCode::kIoError);
  close(fd);
}

TEST_F(TlsStreamTest, AReaderAndAWriterShareEachEndWithoutBlockingEachOther) {
  // Both ends send 8 MiB at once (far beyond the socket buffers) while reading the other's:
  // if a thread held the TLS object while waiting for the socket, this would deadlock.
  TestPki pki;
  Connection c = Connect(pki, pki.Node("worker-1"), pki.ClientCert("team-a"));
  ASSERT_NE(c.server, nullptr);
  ASSERT_NE(c.client, nullptr);
  std::unique_ptr<net::Stream>& srv = c.server;
  std::unique_ptr<net::Stream>& cli = c.client;
  cli->SetReadTimeout(milliseconds(10000));
  cli->SetWriteTimeout(milliseconds(10000));
  const std::string up = testing::RandomBytes(8 << 20, 3), down = testing::RandomBytes(8 << 20, 4);
  auto srv_read = std::async(std::launch::async, [&] { return ReadString(srv.get(), up.size()); });
  auto cli_write = std::async(std::launch::async, [&] {
    Status s;
    for (size_t off = 0; off < up.size() && s.ok(); off += 100000) {
      s = WriteString(cli.get(), up.substr(off, 100000));
    }
    return s;
  });
  auto cli_read =
      std::async(std::launch::async, [&] { return ReadString(cli.get(), down.size()); });
  auto srv_write = std::async(std::launch::async, [&] {
    Status s;
    for (size_t off = 0; off < down.size() && s.ok(); off += 65536) {
      s = WriteString(srv.get(), down.substr(off, 65536));
    }
    return s;
  });
  EXPECT_TRUE(cli_write.get().ok());
  EXPECT_TRUE(srv_write.get().ok());
  auto a = srv_read.get();
  auto b = cli_read.get();
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE(*a == up);
  EXPECT_TRUE(*b == down);
}

TEST_F(TlsStreamTest, WritingToAPeerThatHungUpIsAnErrorNotSigpipe) {
  // A program embedding the client does not ignore SIGPIPE; a write that fails with EPIPE
  // must be an error, not a signal that kills it (OpenSSL's own socket BIO uses write(): with
  // it, this test dies of SIGPIPE, exit 141).
  auto previous = signal(SIGPIPE, SIG_DFL);
  TestPki pki;
  auto server = Server(pki.Options(pki.Node("worker-1")));
  auto client = Client(pki.Options(pki.ClientCert("team-a")));
  auto accepted = AcceptOne(server);
  auto dialled = Dial(client.get(), address_, milliseconds(3000));
  ASSERT_TRUE(dialled.ok()) << dialled.status().ToString();
  std::unique_ptr<net::Stream> srv = accepted.get();
  // The socket's sending side closed under the stream (as when Shutdown() races a writer that
  // already passed its check): every send() now fails with EPIPE, which raises SIGPIPE unless
  // the send says MSG_NOSIGNAL.
  ASSERT_EQ(::shutdown((*dialled)->NativeHandle(), SHUT_WR), 0);
  Status s = WriteString(dialled->get(), std::string(1 << 16, 'x'));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  signal(SIGPIPE, previous);
}

// Records are gathered in a buffer before they are sent: a small write must still reach the
// peer on its own (flushed at the end of the write), and a peer that stops reading must make a
// write fail after the write timeout, not block forever in the flush.
TEST_F(TlsStreamTest, BatchedRecordsAreFlushedAndAStalledPeerTimesTheWriteOut) {
  TestPki pki;
  Connection c = Connect(pki, pki.Node("worker-1"), pki.ClientCert("team-a"));
  ASSERT_NE(c.server, nullptr);
  ASSERT_NE(c.client, nullptr);
  net::Stream* srv = c.server.get();
  net::Stream* cli = c.client.get();
  ASSERT_TRUE(WriteString(cli, "ping").ok());
  srv->SetReadTimeout(milliseconds(3000));
  auto got = ReadString(srv, 4);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, "ping");

  srv->SetWriteTimeout(milliseconds(300));
  const auto start = std::chrono::steady_clock::now();
  Status s = WriteString(srv, std::string(64 << 20, 'x'));  // The client never reads.
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

TEST_F(TlsStreamTest, APlaintextClientIsRefusedAndCanBeToldWhyInTheClear) {
  TestPki pki;
  auto server = Server(pki.Options(pki.Node("worker-1")));
  Status first;
  auto accepted = AcceptOne(server, &first);
  auto plain = net::ConnectTcp(address_, milliseconds(2000));
  ASSERT_TRUE(plain.ok());
  ASSERT_TRUE(WriteString(plain->get(), "CAIRN-FRAME-HEADER").ok());
  std::unique_ptr<net::Stream> srv = accepted.get();
  EXPECT_EQ(first.code(), StatusCode::kFailedPrecondition) << first.ToString();
  EXPECT_NE(first.message().find("TLS is required"), std::string::npos);
  ASSERT_TRUE(WriteString(srv.get(), "use TLS").ok());
  srv.reset();
  auto why = ReadString(plain->get(), 7);
  ASSERT_TRUE(why.ok()) << why.status().ToString();
  EXPECT_EQ(*why, "use TLS");
}

TEST_F(TlsStreamTest, ATlsClientOfAPlaintextServerGetsAClearError) {
  TestPki pki;
  auto client = Client(pki.Options(pki.ClientCert("team-a")));
  auto accepted = AcceptOne(nullptr);
  auto tcp = net::ConnectTcp(address_, milliseconds(2000));
  ASSERT_TRUE(tcp.ok());
  auto plain_server = std::async(std::launch::async, [&] {
    std::unique_ptr<net::Stream> srv = accepted.get();
    std::string junk(24, '\0');
    srv->ReadFull(junk).IgnoreError();  // A plaintext server reads a bad frame and hangs up.
  });
  auto dialled = client->Connect(std::move(tcp).value(), "127.0.0.1", milliseconds(3000));
  plain_server.get();
  EXPECT_EQ(dialled.status().code(), StatusCode::kUnavailable) << dialled.status().ToString();
  EXPECT_NE(dialled.status().message().find("plaintext"), std::string::npos)
      << dialled.status().ToString();
}

TEST_F(TlsStreamTest, RefusesBadServerCertificatesWithTheReason) {
  TestPki pki;
  TestPki stranger("stranger-ca");
  auto client = Client(pki.Options(pki.ClientCert("team-a")));

  tls::CertSpec expired;
  expired.common_name = "worker-old";
  expired.hosts = {"127.0.0.1"};
  expired.not_before_offset = -std::chrono::hours(3);
  expired.valid_for = std::chrono::hours(1);
  Status server_side;
  Status s = Handshake(Server(pki.Options(pki.Issue("old", expired))), client, &server_side);
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
  EXPECT_NE(s.message().find("expired"), std::string::npos) << s.ToString();

  tls::CertSpec elsewhere;
  elsewhere.common_name = "worker-9";
  elsewhere.hosts = {"10.9.9.9", "worker-9.example"};
  s = Handshake(Server(pki.Options(pki.Issue("elsewhere", elsewhere))), client, &server_side);
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
  EXPECT_NE(s.message().find("mismatch"), std::string::npos) << s.ToString();
  s = Handshake(Server(pki.Options(pki.Node("worker-1"))), client, &server_side, "localhost");
  EXPECT_TRUE(s.ok()) << "the DNS name in the certificate: " << s.ToString();

  TlsOptions untrusted = pki.Options(stranger.Node("impostor"));
  untrusted.ca_file = pki.ca_file();
  s = Handshake(Server(untrusted), client, &server_side);
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
  EXPECT_NE(s.message().find("server certificate refused"), std::string::npos) << s.ToString();
}

TEST_F(TlsStreamTest, AMutualTlsServerRefusesMissingUntrustedAndExpiredClientCertificates) {
  TestPki pki;
  TestPki stranger("stranger-ca");
  auto server = Server(pki.Options(pki.Node("worker-1")));

  TlsOptions no_cert;
  no_cert.ca_file = pki.ca_file();
  Status server_side;
  Status s = Handshake(server, Client(no_cert), &server_side);
  EXPECT_EQ(server_side.code(), StatusCode::kPermissionDenied) << server_side.ToString();
  EXPECT_FALSE(s.ok());

  TlsOptions foreign = stranger.Options(stranger.ClientCert("team-x"));
  foreign.ca_file = pki.ca_file();
  s = Handshake(server, Client(foreign), &server_side);
  EXPECT_EQ(server_side.code(), StatusCode::kPermissionDenied) << server_side.ToString();
  EXPECT_NE(server_side.message().find("client certificate refused"), std::string::npos);
  EXPECT_FALSE(s.ok());

  tls::CertSpec expired;
  expired.common_name = "team-old";
  expired.role = tls::CertRole::kClient;
  expired.not_before_offset = -std::chrono::hours(3);
  expired.valid_for = std::chrono::hours(1);
  s = Handshake(server, Client(pki.Options(pki.Issue("team-old", expired))), &server_side);
  EXPECT_EQ(server_side.code(), StatusCode::kPermissionDenied) << server_side.ToString();
  EXPECT_NE(server_side.message().find("expired"), std::string::npos) << server_side.ToString();
  EXPECT_FALSE(s.ok());

  // Without require_peer_certificate, a client without one is served (and has no principal).
  TlsOptions optional = pki.Options(pki.Node("worker-2"));
  optional.require_peer_certificate = false;
  s = Handshake(Server(optional), Client(no_cert), &server_side);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(server_side.ok()) << server_side.ToString();
}

TEST_F(TlsStreamTest, ASilentClientTimesOutTheHandshakeAndShutdownWakesAReader) {
  TestPki pki;
  auto server = Server(pki.Options(pki.Node("worker-1")));
  Status handshake;
  auto accepted = AcceptOne(server, &handshake, milliseconds(200));
  auto silent = net::ConnectTcp(address_, milliseconds(2000));
  ASSERT_TRUE(silent.ok());
  std::unique_ptr<net::Stream> srv = accepted.get();
  EXPECT_EQ(handshake.code(), StatusCode::kDeadlineExceeded) << handshake.ToString();

  auto client = Client(pki.Options(pki.ClientCert("team-a")));
  auto accepted2 = AcceptOne(server);
  auto dialled = Dial(client.get(), address_, milliseconds(3000));
  ASSERT_TRUE(dialled.ok());
  std::unique_ptr<net::Stream> srv2 = accepted2.get();
  auto blocked = std::async(std::launch::async, [&] { return ReadString(dialled->get(), 10); });
  std::this_thread::sleep_for(milliseconds(100));
  (*dialled)->Shutdown();
  EXPECT_EQ(blocked.get().status().code(), StatusCode::kUnavailable);
}

TEST_F(TlsStreamTest, RenewedCertificatesAreUsedByNewConnectionsWithoutARestart) {
  TestPki pki;
  TestPki::Files node = pki.Node("worker-1");
  TlsOptions o = pki.Options(node);
  o.reload_check_interval = milliseconds(0);
  auto server = Server(o);
  auto client = Client(pki.Options(pki.ClientCert("team-a")));
  auto principal_seen = [&]() -> std::string {
    auto accepted = AcceptOne(server);
    auto dialled = Dial(client.get(), address_, milliseconds(3000));
    std::unique_ptr<net::Stream> srv = accepted.get();
    if (!dialled.ok()) return "refused: " + dialled.status().ToString();
    return (*dialled)->PeerPrincipal();
  };
  EXPECT_EQ(principal_seen(), "worker-1");
  EXPECT_EQ(server->generation(), 1u);

  // Renewed in place (new key and certificate written over the old files).
  tls::CertSpec renewed;
  renewed.common_name = "worker-1-renewed";
  renewed.hosts = {"127.0.0.1"};
  auto issued = tls::IssueCertificate(pki.ca(), renewed);
  ASSERT_TRUE(issued.ok());
  testing::WriteFileAtomically(node.key, issued->key_pem);
  testing::WriteFileAtomically(node.cert, issued->cert_pem);
  EXPECT_EQ(principal_seen(), "worker-1-renewed");
  EXPECT_EQ(server->generation(), 2u);

  // A broken renewal is refused and the last good certificates stay in use.
  testing::WriteFileAtomically(node.cert, "not a certificate");
  EXPECT_EQ(server->ReloadIfChanged().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(principal_seen(), "worker-1-renewed");
  EXPECT_EQ(server->generation(), 2u);
}

TEST_F(TlsStreamTest, CreateNamesTheFileThatIsMissingOrWrong) {
  TestPki pki;
  TestPki::Files a = pki.Node("a");
  TestPki::Files b = pki.Node("b");
  TlsOptions o = pki.Options(a);
  o.ca_file = pki.dir() + "/missing.crt";
  auto missing = TlsContext::Create(TlsContext::Role::kServer, o);
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("missing.crt"), std::string::npos);

  o = pki.Options(a);
  o.key_file = b.key;
  auto mismatch = TlsContext::Create(TlsContext::Role::kServer, o);
  EXPECT_EQ(mismatch.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mismatch.status().message().find("mismatch"), std::string::npos)
      << mismatch.status().ToString();

  o = pki.Options(a);
  o.cert_file.clear();
  o.key_file.clear();
  EXPECT_EQ(TlsContext::Create(TlsContext::Role::kServer, o).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(TlsContext::Create(TlsContext::Role::kClient, o).ok())
      << "a client may go without a certificate";
}

}  // namespace
}  // namespace cairn::tls
