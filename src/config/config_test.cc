#include "config/config.h"

#include <gtest/gtest.h>

namespace cairn::config {
namespace {

TEST(ConfigTest, ParsesFullConfig) {
  auto c = ParseConfig(R"({
    "page_size": "2MiB",
    "mounts": [{"path": "/lake", "uri": "s3://b/p", "metadata_ttl": "5s",
                "options": {"endpoint": "http://127.0.0.1:9000"}}],
    "workers": ["127.0.0.1:7070", "127.0.0.1:7071"],
    "worker_timeout": "750ms",
    "write_room_wait": "90s",
    "worker": {"id": "w1", "listen": "127.0.0.1:7070",
               "cache_dirs": [{"path": "/tmp/c", "capacity": "1GiB"}]}
  })");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->client.page_size, 2u << 20);
  ASSERT_EQ(c->client.mounts.size(), 1u);
  EXPECT_EQ(c->client.mounts[0].metadata_ttl, std::chrono::seconds(5));
  EXPECT_EQ(c->client.mounts[0].options.at("endpoint"), "http://127.0.0.1:9000");
  EXPECT_EQ(c->client.workers.size(), 2u);
  EXPECT_EQ(c->client.worker_timeout, std::chrono::milliseconds(750));
  EXPECT_EQ(c->client.write_room_wait, std::chrono::seconds(90));
  EXPECT_EQ(c->worker.cache_dirs[0].capacity_bytes, 1ull << 30);
}

TEST(ConfigTest, RejectsBadFieldsWithTheirNames) {
  auto bad_json = ParseConfig("{");
  EXPECT_EQ(bad_json.status().code(), StatusCode::kInvalidArgument);
  auto unknown = ParseConfig(R"({"mountz": []})");
  EXPECT_NE(unknown.status().message().find("mountz"), std::string::npos);
  auto bad_size = ParseConfig(R"({"page_size": "1000"})");
  EXPECT_NE(bad_size.status().message().find("page_size"), std::string::npos);
  auto bad_mount = ParseConfig(R"({"mounts": [{"path": "/a"}]})");
  EXPECT_FALSE(bad_mount.ok());
  auto bad_cap = ParseConfig(R"({"worker": {"cache_dirs": [{"path": "/x", "capacity": "lots"}]}})");
  EXPECT_NE(bad_cap.status().message().find("capacity"), std::string::npos);
  auto long_wait = ParseConfig(R"({"write_room_wait": "25h"})");
  EXPECT_NE(long_wait.status().message().find("write_room_wait"), std::string::npos);
}

TEST(ConfigTest, AMountIsReadOnlyUnlessItsWriteModeSaysThrough) {
  auto c = ParseConfig(R"({"mounts": [{"path": "/a", "uri": "s3://b/a"},
                                      {"path": "/b", "uri": "s3://b/b", "write_mode": "through"},
                                      {"path": "/c", "uri": "s3://b/c",
                                       "write_mode": "read-only"},
                                      {"path": "/d", "uri": "s3://b/d", "write_mode": "back"}]})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->client.mounts[0].read_only);
  EXPECT_FALSE(c->client.mounts[1].read_only);
  EXPECT_TRUE(c->client.mounts[2].read_only);
  EXPECT_FALSE(c->client.mounts[3].read_only);
  EXPECT_TRUE(c->client.mounts[3].write_back);
  EXPECT_FALSE(c->client.mounts[1].write_back);
  EXPECT_EQ(WriteModeName(c->client.mounts[1]), "through");
  EXPECT_EQ(WriteModeName(c->client.mounts[3]), "back");
  for (const char* bad_config :
       {R"({"mounts": [{"path": "/a", "uri": "s3://b/a", "write_mode": "rw"}]})",
        R"({"mounts": [{"path": "/a", "uri": "s3://b/a", "write_mode": true}]})"}) {
    auto bad = ParseConfig(bad_config);
    EXPECT_NE(bad.status().message().find("write_mode"), std::string::npos) << bad_config;
  }
}

TEST(ConfigTest, ParsesTokenPublicKeys) {
  auto c = ParseConfig(R"({"worker": {"token_public_keys": ["/p/old.pub", "/p/new.pub"]}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->worker.token_public_keys, (std::vector<std::string>{"/p/old.pub", "/p/new.pub"}));
  for (const char* bad : {R"({"worker": {"token_public_keys": "/p/k.pub"}})",
                          R"({"worker": {"token_public_keys": [1]}})",
                          R"({"worker": {"token_public_keys": [""]}})"}) {
    auto r = ParseConfig(bad);
    EXPECT_NE(r.status().message().find("token_public_keys"), std::string::npos) << bad;
  }
  auto allow = ParseConfig(R"({"worker": {"allowed_sources": ["s3://a"],
                                          "allowed_endpoints": ["http://10.0.0.9:9000"]}})");
  ASSERT_TRUE(allow.ok()) << allow.status().ToString();
  EXPECT_EQ(allow->worker.allowed_sources, std::vector<std::string>{"s3://a"});
  EXPECT_EQ(allow->worker.allowed_endpoints, std::vector<std::string>{"http://10.0.0.9:9000"});
}

TEST(ConfigTest, ParsesTlsAndThePlaintextReason) {
  auto c = ParseConfig(R"({"tls": {"ca_file": "/p/ca.crt", "cert_file": "/p/w.crt",
                                   "key_file": "/p/w.key"},
                           "worker": {"insecure_plaintext": "isolated test network",
                                      "metrics_insecure_plaintext": "prometheus without TLS",
                                      "metrics_allow_anonymous": true}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->worker.metrics_insecure_plaintext, "prometheus without TLS");
  EXPECT_TRUE(c->worker.metrics_allow_anonymous);
  EXPECT_EQ(ParseConfig(R"({"worker": {"metrics_allow_anonymous": "yes"}})").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(c->client.tls.enabled());
  EXPECT_EQ(c->client.tls.cert_file, "/p/w.crt");
  EXPECT_EQ(c->client.tls.key_file, "/p/w.key");
  EXPECT_EQ(c->worker.insecure_plaintext, "isolated test network");
  auto etcd = ParseConfig(R"({"etcd_tls": {"cert_file": "/p/e.crt", "key_file": "/p/e.key"}})");
  ASSERT_TRUE(etcd.ok()) << etcd.status().ToString();
  EXPECT_EQ(etcd->client.etcd_tls.cert_file, "/p/e.crt");
  EXPECT_TRUE(etcd->client.etcd_tls.ca_file.empty()) << "the system's CAs by default";
  EXPECT_NE(ParseConfig(R"({"tls": {"cert_file": "/w.crt", "key_file": "/w.key"}})")
                .status()
                .message()
                .find("tls.ca_file"),
            std::string::npos);
  EXPECT_FALSE(ParseConfig(R"({"tls": {"ca_file": "/ca", "cert_file": "/w.crt"}})").ok());
  EXPECT_NE(ParseConfig(R"({"tls": {"ca_file": "/ca", "ciphers": "x"}})")
                .status()
                .message()
                .find("tls.ciphers"),
            std::string::npos);
}

TEST(ConfigTest, ParsesFlags) {
  auto m = ParseMountFlag("/lake=s3://b/p");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->path, "/lake");
  EXPECT_EQ(m->uri, "s3://b/p");
  EXPECT_FALSE(ParseMountFlag("nope").ok());
  auto d = ParseCacheDirFlag("/nvme/c:10GiB", 5);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->capacity_bytes, 10ull << 30);
  EXPECT_EQ(ParseCacheDirFlag("/nvme/c", 5)->capacity_bytes, 5u);
  EXPECT_FALSE(ParseCacheDirFlag("/nvme/c:0", 5).ok());
  EXPECT_FALSE(ParseCacheDirFlag("/nvme/c:big", 5).ok());
}

}  // namespace
}  // namespace cairn::config
