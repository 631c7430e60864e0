#include "http/server.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "net/stream.h"
#include "testing/raw_http_client.h"
#include "testing/test_pki.h"
#include "tls/tls_context.h"

namespace cairn::http {
namespace {

using std::chrono::milliseconds;
using testing::HttpGet;
using testing::RawHttpClient;

// ---- The grammar and limits (no sockets) ----

TEST(ParseRequestTest, SplitsTheTargetAndKeepsHeadersInOrder) {
  const std::string bytes =
      "GET /a/b?x=1&y=2 HTTP/1.1\r\nHost: h\r\nX-Two: 2\r\nx-two: 3\r\n\r\nGET / HTTP/1.1\r\n";
  Request r;
  StatusOr<size_t> used = internal::ParseRequest(bytes, 1024, 1024, &r);
  ASSERT_TRUE(used.ok()) << used.status().ToString();
  EXPECT_EQ(*used, bytes.find("GET /", 1));  // Stops at the pipelined request.
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.target, "/a/b?x=1&y=2");
  EXPECT_EQ(r.path, "/a/b");
  EXPECT_EQ(r.query, "x=1&y=2");
  EXPECT_EQ(r.version, 11);
  EXPECT_TRUE(r.keep_alive);
  EXPECT_EQ(r.Header("HOST"), "h");
  EXPECT_EQ(r.Header("x-two"), "2");  // The first of repeated fields.
  EXPECT_EQ(r.Header("absent"), "");
  ASSERT_EQ(r.headers.size(), 3u);
}

TEST(ParseRequestTest, BodiesByLengthAndChunked) {
  Request r;
  StatusOr<size_t> used =
      internal::ParseRequest("PUT /k HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", 1024, 1024, &r);
  ASSERT_TRUE(used.ok());
  EXPECT_EQ(r.body, "hello");
  used = internal::ParseRequest(
      "PUT /k HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", 1024,
      1024, &r);
  ASSERT_TRUE(used.ok());
  EXPECT_EQ(r.body, "abcde");
}

TEST(ParseRequestTest, IncompleteRequestsAskForMore) {
  Request r;
  EXPECT_EQ(*internal::ParseRequest("GET / HTTP/1.1\r\nHost:", 1024, 1024, &r), 0u);
  EXPECT_EQ(
      *internal::ParseRequest("PUT / HTTP/1.1\r\nContent-Length: 9\r\n\r\nabc", 1024, 1024, &r),
      0u);
}

TEST(ParseRequestTest, RefusesMalformedAndOversizedRequests) {
  Request r;
  using namespace std::string_literals;
  for (const std::string& bad :
       {"this is not http\r\n\r\n"s, "GET / HTTP/9.1\r\n\r\n"s,
        "GET / HTTP/1.1\r\nBad Header: x\r\n\r\n"s,
        "GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"s,
        "GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"s, "GET / HTTP/1.1\r\nX: a\0b\r\n\r\n"s}) {
    StatusOr<size_t> s = internal::ParseRequest(bad, 1024, 1024, &r);
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(internal::ParseRequest("GET / HTTP/1.1\r\nX: " + std::string(2000, 'a') + "\r\n\r\n",
                                   1024, 1024, &r)
                .status()
                .code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(internal::ParseRequest("PUT / HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n", 1024,
                                   1024, &r)
                .status()
                .code(),
            StatusCode::kResourceExhausted);
  std::string chunked = "PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 3; ++i) chunked += "200\r\n" + std::string(512, 'z') + "\r\n";
  EXPECT_EQ(internal::ParseRequest(chunked + "0\r\n\r\n", 1024, 1024, &r).status().code(),
            StatusCode::kResourceExhausted);
}

// ---- A real server ----

// Answers with what it saw of the request and its peer.
Response Echo(const Request& request) {
  return Response::Text(200, request.method + " " + request.path + " [" + request.body + "] " +
                                 (request.peer.encrypted ? "tls" : "plain") +
                                 " principal=" + request.peer.principal +
                                 (request.peer.cluster_node ? " node" : ""));
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.host = "127.0.0.1";
    options_.handler = Echo;
  }
  std::unique_ptr<Server> StartServer() {
    StatusOr<std::unique_ptr<Server>> server = Server::Start(options_);
    EXPECT_TRUE(server.ok()) << server.status().ToString();
    return server.ok() ? std::move(server).value() : nullptr;
  }
  ServerOptions options_;
};

TEST_F(HttpServerTest, HandlerSeesTheRequestAndItsPeer) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  RawHttpClient client(server->port());
  ASSERT_TRUE(client.Send("POST /x?q HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"));
  auto response = client.Read();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "POST /x [abc] plain principal=");
}

TEST_F(HttpServerTest, ExtraHeadersAndCloseComeFromTheHandler) {
  options_.handler = [](const Request&) {
    Response r = Response::Text(201, "made\n");
    r.headers.emplace_back("ETag", "\"e1\"");
    r.close = true;
    return r;
  };
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  RawHttpClient client(server->port());
  ASSERT_TRUE(client.Send(HttpGet("/")));
  auto response = client.Read();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 201);
  EXPECT_EQ(response->headers["etag"], "\"e1\"");
  EXPECT_EQ(response->headers["connection"], "close");
  EXPECT_TRUE(client.ClosedByPeer());
}

// One address cannot hold every connection: at its cap, its own longest-idle connection makes
// room, and other peers' connections are untouched.
TEST_F(HttpServerTest, PerPeerCapEvictsThatPeersOldestIdleConnection) {
  options_.max_connections = 8;
  options_.max_connections_per_peer = 2;
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  RawHttpClient other(server->port(), "127.0.0.2");
  ASSERT_TRUE(other.connected());
  std::vector<std::unique_ptr<RawHttpClient>> silent;
  for (int i = 0; i < 2; ++i) {
    silent.push_back(std::make_unique<RawHttpClient>(server->port(), "127.0.0.3"));
    ASSERT_TRUE(silent.back()->connected());
    std::this_thread::sleep_for(milliseconds(30));
  }
  RawHttpClient third(server->port(), "127.0.0.3");
  ASSERT_TRUE(third.Send(HttpGet("/")));
  auto response = third.Read();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 200);
  EXPECT_TRUE(silent[0]->ClosedByPeer());
  // The other peer's idle connection still works.
  ASSERT_TRUE(other.Send(HttpGet("/other")));
  auto still = other.Read();
  ASSERT_TRUE(still.has_value());
  EXPECT_EQ(still->status, 200);
}

TEST_F(HttpServerTest, PeerWhoseConnectionsAreAllBusyIsRefused) {
  options_.max_connections_per_peer = 1;
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  RawHttpClient busy(server->port(), "127.0.0.4");
  ASSERT_TRUE(busy.Send("GET /hal"));  // Mid-request.
  std::this_thread::sleep_for(milliseconds(100));
  RawHttpClient refused(server->port(), "127.0.0.4");
  auto answer = refused.Read();
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->status, 503);
  RawHttpClient elsewhere(server->port(), "127.0.0.5");
  ASSERT_TRUE(elsewhere.Send(HttpGet("/")));
  auto served = elsewhere.Read();
  ASSERT_TRUE(served.has_value());
  EXPECT_EQ(served->status, 200);
  ASSERT_TRUE(busy.Send("f HTTP/1.1\r\n\r\n"));
  auto finished = busy.Read();
  ASSERT_TRUE(finished.has_value());
  EXPECT_EQ(finished->body, "GET /half [] plain principal=");
}

TEST_F(HttpServerTest, RejectsBadOptions) {
  ServerOptions o = options_;
  o.handler = nullptr;
  EXPECT_EQ(Server::Start(o).status().code(), StatusCode::kInvalidArgument);
  o = options_;
  o.threads = 0;
  EXPECT_EQ(Server::Start(o).status().code(), StatusCode::kInvalidArgument);
  o = options_;
  o.max_connections_per_peer = 0;
  EXPECT_EQ(Server::Start(o).status().code(), StatusCode::kInvalidArgument);
}

// ---- TLS ----

class HttpsServerTest : public HttpServerTest {
 protected:
  void SetUp() override {
    HttpServerTest::SetUp();
    tls::TlsOptions o = pki_.Options(pki_.Node("server"));
    o.require_peer_certificate = false;
    auto ctx = tls::TlsContext::Create(tls::TlsContext::Role::kServer, o);
    ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
    options_.tls = *ctx;
  }

  // One request with "Connection: close" over TLS as `files` (no certificate when empty);
  // returns everything the server sent, or the error.
  StatusOr<std::string> Fetch(uint16_t port, const testing::TestPki& pki,
                              const testing::TestPki::Files* files) {
    tls::TlsOptions o = pki.Options(files != nullptr ? *files : testing::TestPki::Files{});
    CAIRN_ASSIGN_OR_RETURN(auto ctx, tls::TlsContext::Create(tls::TlsContext::Role::kClient, o));
    CAIRN_ASSIGN_OR_RETURN(
        std::unique_ptr<net::Stream> stream,
        tls::Dial(ctx.get(), "127.0.0.1:" + std::to_string(port), milliseconds(3000)));
    stream->SetReadTimeout(milliseconds(3000));
    const std::string request = "GET /who HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    std::span<const char> part(request.data(), request.size());
    CAIRN_RETURN_IF_ERROR(stream->WriteAll({&part, 1}));
    std::string out;
    char c;
    for (;;) {
      Status s = stream->ReadFull({&c, 1});
      if (!s.ok()) {
        if (out.empty()) return s;
        return out;
      }
      out.push_back(c);
    }
  }

  testing::TestPki pki_;
};

TEST_F(HttpsServerTest, ServesTlsAndNamesTheClientCertificate) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  StatusOr<std::string> anonymous = Fetch(server->port(), pki_, nullptr);
  ASSERT_TRUE(anonymous.ok()) << anonymous.status().ToString();
  EXPECT_TRUE(anonymous->ends_with("\r\n\r\nGET /who [] tls principal=")) << *anonymous;

  testing::TestPki::Files team = pki_.ClientCert("team-a");
  StatusOr<std::string> named = Fetch(server->port(), pki_, &team);
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  EXPECT_NE(named->find("tls principal=team-a"), std::string::npos) << *named;
  EXPECT_EQ(named->find(" node"), std::string::npos);

  testing::TestPki::Files node = pki_.Node("w2");
  StatusOr<std::string> member = Fetch(server->port(), pki_, &node);
  ASSERT_TRUE(member.ok()) << member.status().ToString();
  EXPECT_NE(member->find("principal=w2 node"), std::string::npos) << *member;
}

TEST_F(HttpsServerTest, PlaintextRequestIsToldToUseTls) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  RawHttpClient client(server->port());
  ASSERT_TRUE(client.Send(HttpGet("/metrics")));
  auto response = client.Read();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 400);
  EXPECT_NE(response->body.find("requires TLS"), std::string::npos);
  EXPECT_TRUE(client.ClosedByPeer());
}

TEST_F(HttpsServerTest, CertificateOfAnotherCaIsRefused) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  testing::TestPki stranger("other-ca");
  testing::TestPki::Files intruder = stranger.ClientCert("intruder");
  // The intruder trusts our CA (so its side of the handshake completes) but presents a
  // certificate our server does not trust.
  auto ctx = tls::TlsContext::Create(tls::TlsContext::Role::kClient, pki_.Options(intruder));
  ASSERT_TRUE(ctx.ok());
  auto stream =
      tls::Dial(ctx->get(), "127.0.0.1:" + std::to_string(server->port()), milliseconds(3000));
  if (stream.ok()) {
    (*stream)->SetReadTimeout(milliseconds(3000));
    const std::string request = "GET / HTTP/1.1\r\n\r\n";
    std::span<const char> part(request.data(), request.size());
    (*stream)->WriteAll({&part, 1}).IgnoreError();
    char c;
    Status read = (*stream)->ReadFull({&c, 1});
    EXPECT_FALSE(read.ok());  // No answer: the handshake was refused.
  }
}

TEST_F(HttpsServerTest, SilentConnectionBeforeTheHandshakeIsClosed) {
  options_.idle_timeout = milliseconds(200);
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  RawHttpClient silent(server->port());
  ASSERT_TRUE(silent.connected());
  EXPECT_TRUE(silent.ClosedByPeer());
}

}  // namespace
}  // namespace cairn::http
