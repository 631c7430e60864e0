#include "metrics/http_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "testing/raw_http_client.h"

namespace cairn::metrics {
namespace {

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

using RawClient = testing::RawHttpClient;

std::string Get(const std::string& path) { return testing::HttpGet(path); }

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    reads_ = registry_.AddCounter("cairn_reads_total", "Reads.");
    options_.host = "127.0.0.1";
    options_.registry = &registry_;
  }

  std::unique_ptr<HttpServer> StartServer() {
    StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(options_);
    EXPECT_TRUE(server.ok()) << server.status().ToString();
    return server.ok() ? std::move(server).value() : nullptr;
  }

  Registry registry_;
  Counter* reads_ = nullptr;
  HttpServerOptions options_;
};

TEST_F(HttpServerTest, ServesMetrics) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  EXPECT_NE(server->port(), 0);
  reads_->Increment(7);
  RawClient client(server->port());
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.Send(Get("/metrics")));
  const auto response = client.Read();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->headers.at("content-type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(response->body,
            "# HELP cairn_reads_total Reads.\n"
            "# TYPE cairn_reads_total counter\n"
            "cairn_reads_total 7\n");
}

TEST_F(HttpServerTest, KeepAliveAndPipelining) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  RawClient client(server->port());
  ASSERT_TRUE(client.Send(Get("/metrics")));
  auto first = client.Read();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->headers.at("connection"), "keep-alive");
  reads_->Increment();
  // Two requests in one segment: both answered, in order, on the same connection.
  ASSERT_TRUE(client.Send(Get("/metrics") + Get("/nope")));
  auto second = client.Read();
  auto third = client.Read();
  ASSERT_TRUE(second.has_value() && third.has_value());
  EXPECT_NE(second->body.find("cairn_reads_total 1\n"), std::string::npos);
  EXPECT_EQ(third->status, 404);
  EXPECT_EQ(server->open_connections(), 1u);
}

TEST_F(HttpServerTest, HealthReflectsTheCallback) {
  std::atomic<bool> healthy = true;
  options_.health = [&healthy]() -> std::pair<bool, std::string> {
    if (healthy) return {true, ""};
    return {false, "page store: disk /nvme0 failed"};
  };
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  RawClient client(server->port());
  ASSERT_TRUE(client.Send(Get("/healthz")));
  auto ok = client.Read();
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ok->body, "ok\n");
  healthy = false;
  ASSERT_TRUE(client.Send(Get("/healthz")));
  auto sick = client.Read();
  ASSERT_TRUE(sick.has_value());
  EXPECT_EQ(sick->status, 503);
  EXPECT_EQ(sick->body, "page store: disk /nvme0 failed\n");
}

TEST_F(HttpServerTest, HealthWithoutCallbackIsOk) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  RawClient client(server->port());
  ASSERT_TRUE(client.Send(Get("/healthz")));
  auto response = client.Read();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "ok\n");
}

TEST_F(HttpServerTest, ThrowingHealthCallbackAnswers500) {
  options_.health = []() -> std::pair<bool, std::string> { throw std::runtime_error("bug"); };
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  RawClient client(server->port());
  ASSERT_TRUE(client.Send(Get("/healthz")));
  auto response = client.Read();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 500);
  EXPECT_TRUE(client.ClosedByPeer());
}

TEST_F(HttpServerTest, UnknownPathIs404AndWrongMethodIs405) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  RawClient client(server->port());
  ASSERT_TRUE(client.Send(Get("/metricsx")));
  auto missing = client.Read();
  ASSERT_TRUE(missing.has_value());
  EXPECT_EQ(missing->status, 404);
  // A body is read and dropped, so the connection stays usable.
  ASSERT_TRUE(client.Send("POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"));
  auto wrong = client.Read();
  ASSERT_TRUE(wrong.has_value());
  EXPECT_EQ(wrong->status, 405);
  EXPECT_EQ(wrong->headers.at("allow"), "GET, HEAD");
  ASSERT_TRUE(client.Send(Get("/healthz")));
  auto after = client.Read();
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->status, 200);
}

TEST_F(HttpServerTest, HeadHasHeadersButNoBody) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("HEAD /metrics HTTP/1.1\r\n\r\n" + Get("/healthz")));
  auto head = client.Read(/*head_request=*/true);
  ASSERT_TRUE(head.has_value());
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->headers.at("content-length"), std::to_string(registry_.ExposeText().size()));
  auto next = client.Read();  // Would be garbled if the HEAD response carried a body.
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->body, "ok\n");
}

TEST_F(HttpServerTest, MalformedRequestGets400AndIsClosed) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("this is not http\r\n\r\n"));
  auto response = client.Read();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 400);
  EXPECT_EQ(response->headers.at("connection"), "close");
  EXPECT_TRUE(client.ClosedByPeer());
}

TEST_F(HttpServerTest, OversizedRequestsAreRefusedAndClosed) {
  options_.max_request_bytes = 1024;
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  {
    RawClient client(server->port());
    ASSERT_TRUE(client.Send("GET /metrics HTTP/1.1\r\nX: " + std::string(2000, 'a') + "\r\n\r\n"));
    auto response = client.Read();
    ASSERT_TRUE(response.has_value());
    EXPECT_EQ(response->status, 431);
    EXPECT_TRUE(client.ClosedByPeer());
  }
  {
    RawClient client(server->port());
    ASSERT_TRUE(client.Send("POST /metrics HTTP/1.1\r\nContent-Length: 5000\r\n\r\n"));
    auto response = client.Read();
    ASSERT_TRUE(response.has_value());
    EXPECT_EQ(response->status, 413);
    EXPECT_TRUE(client.ClosedByPeer());
  }
  {
    // A chunked body counts against the same bound as it arrives.
    RawClient client(server->port());
    std::string chunk(512, 'b');
    std::string body;
    for (int i = 0; i < 4; ++i) body += "200\r\n" + chunk + "\r\n";
    ASSERT_TRUE(client.Send("POST /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + body +
                            "0\r\n\r\n"));
    auto response = client.Read();
    ASSERT_TRUE(response.has_value());
    EXPECT_EQ(response->status, 413);
    EXPECT_TRUE(client.ClosedByPeer());
  }
  {
    // One under the bound is read (and dropped: 405), and the connection stays usable.
    RawClient client(server->port());
    ASSERT_TRUE(client.Send(
        "POST /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"));
    auto response = client.Read();
    ASSERT_TRUE(response.has_value());
    EXPECT_EQ(response->status, 405);
    ASSERT_TRUE(client.Send(Get("/healthz")));
    auto after = client.Read();
    ASSERT_TRUE(after.has_value());
    EXPECT_EQ(after->status, 200);
  }
}

TEST_F(HttpServerTest, Http10ClosesAfterTheResponse) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("GET /healthz HTTP/1.0\r\n\r\n"));
  auto response = client.Read();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->headers.at("connection"), "close");
  EXPECT_TRUE(client.ClosedByPeer());
}

TEST_F(HttpServerTest, SlowRequestTimesOutWith408) {
  options_.request_timeout = milliseconds(200);
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  RawClient client(server->port());
  const auto start = SteadyClock::now();
  ASSERT_TRUE(client.Send("GET /metr"));
  auto response = client.Read();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 408);
  EXPECT_TRUE(client.ClosedByPeer());
  EXPECT_LT(SteadyClock::now() - start, std::chrono::seconds(3));
}

TEST_F(HttpServerTest, TricklingClientCannotExtendTheDeadline) {
  options_.request_timeout = milliseconds(300);
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  RawClient client(server->port());
  const auto start = SteadyClock::now();
  // One byte every 50 ms would keep a per-read timeout alive forever.
  for (int i = 0; i < 40 && client.Send("X"); ++i) std::this_thread::sleep_for(milliseconds(50));
  auto response = client.Read();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 408);
  EXPECT_LT(SteadyClock::now() - start, std::chrono::seconds(3));
}

TEST_F(HttpServerTest, IdleConnectionIsClosedSilently) {
  options_.idle_timeout = milliseconds(200);
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  RawClient client(server->port());
  ASSERT_TRUE(client.connected());
  EXPECT_TRUE(client.ClosedByPeer());
}

TEST_F(HttpServerTest, ConnectionLimitAnswers503WhenEveryConnectionIsMidRequest) {
  options_.max_connections = 1;
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  RawClient first(server->port());
  ASSERT_TRUE(first.Send("GET /heal"));  // A request in progress: not idle.
  std::this_thread::sleep_for(milliseconds(100));
  RawClient second(server->port());
  auto refused = second.Read();
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->status, 503);
  // The first connection is unaffected.
  ASSERT_TRUE(first.Send("thz HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto answered = first.Read();
  ASSERT_TRUE(answered.has_value());
  EXPECT_EQ(answered->status, 200);
}

TEST_F(HttpServerTest, IdleConnectionsCannotLockOutScrapes) {
  // Silent connections fill every slot (as a port scan or a hostile client would); each new
  // scrape closes the longest-idle one instead of being refused.
  options_.max_connections = 4;
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  std::vector<std::unique_ptr<RawClient>> silent;
  for (int i = 0; i < 4; ++i) {
    silent.push_back(std::make_unique<RawClient>(server->port()));
    ASSERT_TRUE(silent.back()->connected());
    std::this_thread::sleep_for(milliseconds(30));  // Distinct idle times: [0] is the oldest.
  }
  for (int scrape = 0; scrape < 3; ++scrape) {
    RawClient probe(server->port());
    ASSERT_TRUE(probe.Send(Get("/healthz")));
    auto response = probe.Read();
    ASSERT_TRUE(response.has_value()) << scrape;
    EXPECT_EQ(response->status, 200) << scrape;
    // The oldest silent connection made room; the attacker fills the slot again.
    EXPECT_TRUE(silent[scrape]->ClosedByPeer()) << scrape;
    silent.push_back(std::make_unique<RawClient>(server->port()));
    std::this_thread::sleep_for(milliseconds(30));
  }
  EXPECT_LE(server->open_connections(), 5u);
}

TEST_F(HttpServerTest, ManyConcurrentClients) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  std::atomic<int> ok_responses = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      RawClient client(server->port());
      for (int i = 0; i < 25; ++i) {
        reads_->Increment();
        if (!client.Send(Get("/metrics"))) return;
        auto response = client.Read();
        if (response && response->status == 200) ++ok_responses;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(ok_responses, 200);
}

TEST_F(HttpServerTest, StopClosesIdleConnectionsPromptlyAndFreesThePort) {
  options_.idle_timeout = std::chrono::minutes(10);
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  const uint16_t port = server->port();
  RawClient idle(port);
  ASSERT_TRUE(idle.Send(Get("/healthz")));
  ASSERT_TRUE(idle.Read().has_value());
  RawClient half(port);
  ASSERT_TRUE(half.Send("GET /hea"));  // Mid-request.
  std::this_thread::sleep_for(milliseconds(50));

  const auto start = SteadyClock::now();
  server->Stop();
  EXPECT_LT(SteadyClock::now() - start, std::chrono::seconds(2));
  EXPECT_TRUE(idle.ClosedByPeer());
  server->Stop();  // Idempotent.
  server.reset();

  RawClient refused(port);
  EXPECT_FALSE(refused.connected());

  // Start again on the same port.
  options_.port = port;
  auto again = StartServer();
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->port(), port);
  RawClient client(port);
  ASSERT_TRUE(client.Send(Get("/healthz")));
  auto response = client.Read();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 200);
}

TEST_F(HttpServerTest, PortInUseIsAnError) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  options_.port = server->port();
  StatusOr<std::unique_ptr<HttpServer>> second = HttpServer::Start(options_);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kIoError) << second.status().ToString();
}

TEST_F(HttpServerTest, RejectsBadOptions) {
  HttpServerOptions options = options_;
  options.registry = nullptr;
  EXPECT_EQ(HttpServer::Start(options).status().code(), StatusCode::kInvalidArgument);
  options = options_;
  options.max_connections = 0;
  EXPECT_EQ(HttpServer::Start(options).status().code(), StatusCode::kInvalidArgument);
  options = options_;
  options.request_timeout = milliseconds(0);
  EXPECT_EQ(HttpServer::Start(options).status().code(), StatusCode::kInvalidArgument);
  options = options_;
  options.host = "nonexistent.invalid";  // RFC 6761: never resolves.
  EXPECT_EQ(HttpServer::Start(options).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(HttpServerTest, BindsIpv6LoopbackWhenAvailable) {
  options_.host = "::1";
  StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(options_);
  if (!server.ok()) GTEST_SKIP() << "no IPv6 loopback here: " << server.status().ToString();
  EXPECT_NE((*server)->port(), 0);
}

// Over TLS, /metrics needs a verified client certificate (unless configured otherwise), while
// /healthz stays open to probes that send none.
TEST(MetricsRoutingTest, MetricsOverTlsNeedAClientCertificate) {
  Registry registry;
  registry.AddCounter("cairn_reads_total", "Reads.");
  HttpServerOptions options;
  options.registry = &registry;
  http::Request request;
  request.method = "GET";
  request.path = "/metrics";
  request.peer.encrypted = true;
  http::Response anonymous = HandleMetricsRequest(options, request);
  EXPECT_EQ(anonymous.status, 403);
  EXPECT_EQ(anonymous.body.find("cairn_reads_total"), std::string::npos);

  request.peer.principal = "prometheus";
  EXPECT_EQ(HandleMetricsRequest(options, request).status, 200);

  request.peer.principal.clear();
  options.metrics_need_client_certificate = false;
  EXPECT_EQ(HandleMetricsRequest(options, request).status, 200);

  options.metrics_need_client_certificate = true;
  request.path = "/healthz";
  EXPECT_EQ(HandleMetricsRequest(options, request).status, 200);
  // Plaintext (a loopback or explicitly plaintext endpoint) has no certificates to ask for.
  request.path = "/metrics";
  request.peer.encrypted = false;
  EXPECT_EQ(HandleMetricsRequest(options, request).status, 200);
}

}  // namespace
}  // namespace cairn::metrics
