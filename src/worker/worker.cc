#include "worker/worker.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "mount/mount_table.h"
#include "net/stream.h"
#include "common/file_util.h"
#include "tls/tls_context.h"
#include "transport/remote_channel.h"
#include "worker/source_caches.h"

namespace cairn::worker {
namespace {

// Threads that write the in-process client's pages to the spool (LocalChannel): enough to keep
// several open files going while their writers copy the next bytes.
constexpr int kLocalWriteThreads = 4;

std::string NewInstanceToken() {
  std::random_device rd;
  Hash128 h{(uint64_t{rd()} << 32) | rd(), (uint64_t{rd()} << 32) | rd()};
  return h.ToHex();
}

// Writes the token atomically (temp + rename), readable by the owner only, like the folder.
Status WriteInstanceFile(const std::string& dir, const std::string& token) {
  std::string path = dir + "/INSTANCE";
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << token << "\n";
    if (!out) return IoError("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return ErrnoToStatus(errno, "rename " + tmp);
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<Worker>> Worker::Start(WorkerOptions options) {
  std::unique_ptr<Worker> w(new Worker());
  CAIRN_RETURN_IF_ERROR(w->Init(std::move(options)));
  return w;
}

namespace {

// The verifier of the tokens signed by the keys in `files` (none: no files).
StatusOr<std::optional<auth::TokenVerifier>> LoadTokenKeys(const std::vector<std::string>& files) {
  if (files.empty()) return std::optional<auth::TokenVerifier>();
  std::vector<std::string> pems;
  for (const std::string& f : files) {
    StatusOr<std::string> pem = ReadSmallFile(f, 64 << 10);
    if (!pem.ok()) return pem.status().WithContext("token public key");
    pems.push_back(std::move(pem).value());
  }
  StatusOr<auth::TokenVerifier> verifier = auth::TokenVerifier::FromPublicKeyPems(pems);
  if (!verifier.ok()) return verifier.status().WithContext("token public key");
  spdlog::info("accepting tokens signed by {} key(s)", verifier->key_ids().size());
  return std::optional<auth::TokenVerifier>(std::move(verifier).value());
}

// The page service's TLS and the dialler's for its peers, or why it may serve plaintext.
Status MakeTls(const WorkerOptions& o, const std::string& listen_host,
               std::shared_ptr<tls::TlsContext>* server, std::shared_ptr<tls::TlsContext>* peers) {
  if (!o.tls.enabled()) {
    if (net::IsLoopbackHost(listen_host)) return Status::Ok();
    if (o.config.insecure_plaintext.empty()) {
      return InvalidArgumentError(
          "the worker would serve plaintext on " + o.config.listen +
          ": give it TLS (--tls-ca, --tls-cert, --tls-key; `cairn cert` makes them), listen on a "
          "loopback address, or state why plaintext is acceptable with --insecure-plaintext "
          "REASON (docs/security.md)");
    }
    spdlog::warn("serving plaintext on {} (--insecure-plaintext: {})", o.config.listen,
                 o.config.insecure_plaintext);
    return Status::Ok();
  }
  if (o.tls.cert_file.empty()) {
    return InvalidArgumentError(
        "a TLS worker needs its node certificate and key (--tls-cert, --tls-key)");
  }
  tls::TlsOptions t;
  t.ca_file = o.tls.ca_file;
  t.cert_file = o.tls.cert_file;
  t.key_file = o.tls.key_file;
  // Mutual TLS, unless the worker accepts tokens: a job may then prove who it is with a token
  // alone (a connection with neither certificate nor token is anonymous, and an enabled policy
  // grants anonymous connections nothing).
  t.require_peer_certificate = o.config.token_public_keys.empty();
  CAIRN_ASSIGN_OR_RETURN(*server, tls::TlsContext::Create(tls::TlsContext::Role::kServer, t));
  CAIRN_ASSIGN_OR_RETURN(*peers, tls::TlsContext::Create(tls::TlsContext::Role::kClient, t));
  return Status::Ok();
}

// The metrics endpoint's TLS (null: plaintext), or why it may not serve plaintext.
Status MakeMetricsTls(const WorkerOptions& o, const std::string& host,
                      std::shared_ptr<tls::TlsContext>* out) {
  const config::WorkerConfig& cfg = o.config;
  const std::string& reason = !cfg.metrics_insecure_plaintext.empty()
                                  ? cfg.metrics_insecure_plaintext
                                  : (o.tls.enabled() ? std::string() : cfg.insecure_plaintext);
  if (o.tls.enabled() && !o.tls.cert_file.empty() && cfg.metrics_insecure_plaintext.empty()) {
    tls::TlsOptions t;
    t.ca_file = o.tls.ca_file;
    t.cert_file = o.tls.cert_file;
    t.key_file = o.tls.key_file;
    // Asked for, not required: /healthz is for probes that have no certificate; /metrics
    // checks for one per request (metrics/http_server.h).
    t.require_peer_certificate = false;
    CAIRN_ASSIGN_OR_RETURN(*out, tls::TlsContext::Create(tls::TlsContext::Role::kServer, t));
    return Status::Ok();
  }
  if (net::IsLoopbackHost(host)) return Status::Ok();
  if (reason.empty()) {
    return InvalidArgumentError(
        "the worker would serve /metrics in plaintext on " + cfg.metrics_listen +
        ": give the worker TLS (--tls-ca, --tls-cert, --tls-key), listen on a loopback address, "
        "or state why plaintext is acceptable with --metrics-insecure-plaintext REASON "
        "(docs/security.md)");
  }
  spdlog::warn("serving /metrics in plaintext on {} ({})", cfg.metrics_listen, reason);
  return Status::Ok();
}

}  // namespace

Status Worker::Init(WorkerOptions options) {
  const config::WorkerConfig& cfg = options.config;
  if (cfg.cache_dirs.empty()) return InvalidArgumentError("the worker needs a cache folder");
  std::string listen_host;
  uint16_t listen_port = 0;
  if (options.serve_tcp) {
    CAIRN_RETURN_IF_ERROR(net::ParseHostPort(cfg.listen, &listen_host, &listen_port));
  }
  std::shared_ptr<tls::TlsContext> server_tls, peer_tls;
  if (options.serve_tcp)
    CAIRN_RETURN_IF_ERROR(MakeTls(options, listen_host, &server_tls, &peer_tls));
  // Settled before anything starts: a refusal must not come after the cache was opened.
  std::string metrics_host;
  uint16_t metrics_port = 0;
  std::shared_ptr<tls::TlsContext> metrics_tls;
  if (!cfg.metrics_listen.empty()) {
    CAIRN_RETURN_IF_ERROR(net::ParseHostPort(cfg.metrics_listen, &metrics_host, &metrics_port)
                              .WithContext("metrics listen address"));
    if (cfg.metrics_listen == config::kDefaultMetricsListen && !options.tls.enabled() &&
        options.serve_tcp && net::IsLoopbackHost(listen_host) &&
        cfg.metrics_insecure_plaintext.empty()) {
      metrics_host = "127.0.0.1";
    }
    CAIRN_RETURN_IF_ERROR(MakeMetricsTls(options, metrics_host, &metrics_tls));
  }
  id_ = cfg.id;
  if (id_.empty()) {
    char host[256] = "worker";
    gethostname(host, sizeof(host) - 1);
    id_ = std::string(host) + ":" + std::to_string(listen_port);
  }

  if (options.etcd_endpoints.empty() && options.mounts.empty()) {
    return InvalidArgumentError(
        "the worker has nothing to serve: give --mount PATH=URI (or --etcd for cluster mode)");
  }
  // Checked before anything is opened (JoinCluster builds the list again to use it).
  CAIRN_RETURN_IF_ERROR(
      mount::SourceAllowList::Create(cfg.allowed_sources, cfg.allowed_endpoints).status());
  if (!options.etcd_endpoints.empty() && !options.mounts.empty()) {
    return InvalidArgumentError(
        "with etcd, mounts come from etcd (cairn mount add): do not also "
        "give them to the worker");
  }
  if (cfg.ufs_max_concurrency > 0 || cfg.ufs_max_bytes_per_second > 0) {
    ufs::LimiterOptions lo;
    lo.max_concurrency = cfg.ufs_max_concurrency;
    lo.max_bytes_per_second = cfg.ufs_max_bytes_per_second;
    lo.name = "worker";
    CAIRN_ASSIGN_OR_RETURN(ufs_limiter_, ufs::UfsLimiter::Create(lo));
  }
  std::vector<std::shared_ptr<ufs::UfsLimiter>> limiters;
  if (ufs_limiter_) limiters.push_back(ufs_limiter_);
  registry_ = std::make_unique<metrics::Registry>();
  std::shared_ptr<const mount::MountTable> mounts;
  const mount::MountTable::StoreDecorator source_caches = SourceCaches(registry_.get());
  if (options.ufs_override.empty()) {
    CAIRN_ASSIGN_OR_RETURN(mounts,
                           mount::MountTable::Create(options.mounts, limiters, source_caches));
  } else {
    std::vector<std::shared_ptr<ufs::UnderStorage>> stores = options.ufs_override;
    for (size_t i = 0; i < stores.size() && i < options.mounts.size(); ++i) {
      stores[i] = source_caches(options.mounts[i], std::move(stores[i]));
    }
    CAIRN_ASSIGN_OR_RETURN(mounts, mount::MountTable::CreateWith(options.mounts, stores));
  }

  page_rules_ = std::make_unique<PageRules>(Clock::Real());
  eviction_tracker_ = std::make_unique<EvictionTracker>(page_rules_.get(), registry_.get());
  page_rules_->SetMounts(mounts);
  pagestore::PageStoreOptions so;
  for (const auto& d : cfg.cache_dirs) so.dirs.push_back({d.path, d.capacity_bytes});
  so.page_size = options.page_size;
  so.eviction_policy = cfg.eviction_policy;
  PageRules* page_rules = page_rules_.get();
  so.attributes = [page_rules](std::string_view object_id) {
    return page_rules->HintsFor(object_id);
  };
  EvictionTracker* tracker = eviction_tracker_.get();
  so.on_evict = [tracker](std::string_view object_id, uint64_t bytes,
                          pagestore::EvictionReason reason) {
    tracker->Record(object_id, bytes, reason);
  };
  CAIRN_ASSIGN_OR_RETURN(store_, pagestore::PageStore::Create(so));

  PageServiceOptions po;
  po.page_size = options.page_size;
  po.worker_id = id_;
  po.rules = page_rules_.get();
  // Cluster mode: a client may see a new mount in etcd a moment before this worker does.
  if (!options.etcd_endpoints.empty()) {
    po.unknown_mount_wait = std::chrono::milliseconds(2000);
  }
  po.peer_fill = options.peer_fill;
  po.source_read_bytes = options.source_read_bytes;
  if (!options.etcd_endpoints.empty()) {
    // Replication: a miss looks for the page on its other replicas, and the replicas that lack
    // it copy it from the worker that fetched it.
    transport::RemoteChannelOptions ro;
    ro.connections = 2;
    ro.page_size = options.page_size;
    ro.request_timeout = po.peer_timeout;
    ro.short_circuit = false;  // The peer's files are its own, even on a shared machine.
    if (peer_tls != nullptr) {
      ro.connect = [peer_tls](const std::string& address, std::chrono::milliseconds timeout) {
        return tls::Dial(peer_tls.get(), address, timeout);
      };
    }
    peers_ = std::make_unique<PeerSet>(id_, [ro](const std::string& address) {
      transport::RemoteChannelOptions to_peer = ro;
      to_peer.address = address;
      return std::make_shared<transport::RemoteChannel>(std::move(to_peer));
    });
    po.peers = peers_.get();
  }
  if (options.serve_tcp) {
    po.instance_token = NewInstanceToken();
    for (const auto& d : cfg.cache_dirs) {
      Status s = WriteInstanceFile(d.path, po.instance_token);
      if (!s.ok()) {  // Only costs the short-circuit path.
        spdlog::warn("short-circuit reads disabled: {}", s.ToString());
        po.cache_dirs.clear();
        break;
      }
      po.cache_dirs.push_back(std::filesystem::absolute(d.path).lexically_normal().string());
    }
  }
  service_ = std::make_unique<PageService>(mounts, store_.get(), registry_.get(), po);
  WriteServiceOptions wo;
  for (const auto& d : cfg.cache_dirs) wo.spool_dirs.push_back(d.path + "/spool");
  wo.registry = registry_.get();
  if (!cfg.cache_dirs.empty()) {
    // One journal per worker, next to the first cache folder's spool files (docs/write-path.md).
    CAIRN_ASSIGN_OR_RETURN(wo.write_back.journal_path, ChooseJournalPath(wo.spool_dirs));
    uint64_t capacity = 0;
    for (const auto& d : cfg.cache_dirs) capacity += d.capacity_bytes;
    wo.write_back.max_pending_bytes = cfg.write_back_max_pending_bytes != 0
                                          ? cfg.write_back_max_pending_bytes
                                          : std::max<uint64_t>(capacity / 4, 64 << 20);
    if (cfg.write_back_delay.count() >= 0) wo.write_back.commit_delay = cfg.write_back_delay;
    // Each waiting file holds its spool file open: half the descriptors at most.
    struct rlimit files {};
    if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY) {
      wo.write_back.max_pending_files =
          std::clamp<size_t>(files.rlim_cur / 2, 256, wo.write_back.max_pending_files);
    }
  }
  if (cfg.write_idle_timeout.count() > 0) wo.idle_timeout = cfg.write_idle_timeout;
  WrittenPagesOptions wpo;
  wpo.registry = registry_.get();
  written_pages_ = std::make_unique<WrittenPages>(service_.get(), wpo);
  wo.written_pages = written_pages_.get();
  if (peers_ != nullptr) {
    wo.owner_of = [peers = peers_.get()](const std::string& path) { return peers->OwnerOf(path); };
    peer_pending_ = std::make_unique<PeerPending>(
        peers_.get(), std::min<std::chrono::milliseconds>(po.peer_timeout, std::chrono::seconds(1)),
        po.clock);
    wo.pending_at_peers = [at = peer_pending_.get()](const std::string& dir) {
      return at->ChildrenUnder(dir);
    };
  }
  CAIRN_ASSIGN_OR_RETURN(writes_, WriteService::Create(service_.get(), std::move(wo)));
  local_channel_ =
      std::make_unique<LocalChannel>(service_.get(), writes_.get(), kLocalWriteThreads);
  RegisterStoreMetrics();
  RegisterLimiterMetrics();
  if (options.etcd_endpoints.empty()) {  // Cluster mode: the agent keeps them up to date.
    std::set<std::string> exported;
    ExportMountGauges(registry_.get(), store_.get(), *mounts, &exported);
  }

  if (options.serve_tcp) {
    RequestAuthorizer::Options ao;
    CAIRN_ASSIGN_OR_RETURN(ao.tokens, LoadTokenKeys(cfg.token_public_keys));
    ao.registry = registry_.get();
    authorizer_ = std::make_unique<RequestAuthorizer>(std::move(ao));
    // Until the first policy arrives from etcd, nothing but cluster members is served: a
    // worker must not serve a moment of open access to a cluster that has a policy. Clients
    // are answered Unavailable meanwhile (they read elsewhere), not denied: a worker restarted
    // under a client that still has it in its ring must not fail that client's reads.
    if (!options.etcd_endpoints.empty()) {
      authorizer_->AwaitPolicy();
    }
    ServerOptions sv;
    sv.authorizer = authorizer_.get();
    sv.writes = writes_.get();
    sv.host = listen_host;
    sv.port = listen_port;
    sv.registry = registry_.get();
    sv.tls = server_tls;
    CAIRN_ASSIGN_OR_RETURN(server_, WorkerServer::Start(service_.get(), sv));
  }
  if (!cfg.metrics_listen.empty()) {
    metrics::HttpServerOptions ho;
    ho.host = metrics_host;
    ho.port = metrics_port;
    metrics_host_ = metrics_host;
    ho.registry = registry_.get();
    ho.tls = metrics_tls;
    ho.metrics_need_client_certificate = !cfg.metrics_allow_anonymous;
    metrics_tls_ = ho.tls != nullptr;
    pagestore::PageStore* store = store_.get();
    ho.health = [store]() -> std::pair<bool, std::string> {
      pagestore::PageStoreStats s = store->Stats();
      if (s.capacity_bytes == 0) return {false, "no cache capacity"};
      return {true, s.recovering ? "ok (recovering cache index)" : "ok"};
    };
    CAIRN_ASSIGN_OR_RETURN(http_, metrics::HttpServer::Start(ho));
  }
  if (!options.etcd_endpoints.empty()) CAIRN_RETURN_IF_ERROR(JoinCluster(options));
  spdlog::info("worker {} serving {} mount(s), cache {} bytes, page size {}{}", id_,
               service_->mount_table()->mounts().size(), store_->Stats().capacity_bytes,
               options.page_size, server_ ? " on port " + std::to_string(server_->port()) : "");
  return Status::Ok();
}

namespace {

bool IsWildcardHost(const std::string& host) {
  return host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]";
}

std::string HostName() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') return "localhost";
  return host;
}

}  // namespace

Status Worker::JoinCluster(const WorkerOptions& options) {
  if (!server_) return InvalidArgumentError("cluster mode needs the TCP page service");
  std::string host;
  uint16_t port = 0;
  if (!options.advertise_address.empty()) {
    CAIRN_RETURN_IF_ERROR(
        net::ParseHostPort(options.advertise_address, &host, &port).WithContext("--advertise"));
    advertised_ = options.advertise_address;
  } else {
    CAIRN_RETURN_IF_ERROR(net::ParseHostPort(options.config.listen, &host, &port));
    if (IsWildcardHost(host)) host = HostName();
    advertised_ = host + ":" + std::to_string(server_->port());
  }
  ClusterAgentOptions co;
  co.etcd_endpoints = options.etcd_endpoints;
  co.etcd_tls = {options.etcd_tls.ca_file, options.etcd_tls.cert_file, options.etcd_tls.key_file};
  co.etcd_insecure_plaintext = options.etcd_insecure_plaintext;
  co.lease_ttl = options.lease_ttl;
  co.record.id = id_;
  co.record.address = advertised_;
  if (http_) {
    const std::string mhost = IsWildcardHost(metrics_host_) ? host : metrics_host_;
    co.record.metrics_address = mhost + ":" + std::to_string(http_->port());
    co.record.metrics_tls = metrics_tls_;
  }
  co.peers = peers_.get();
  co.authorizer = authorizer_.get();
  CAIRN_ASSIGN_OR_RETURN(co.allowed_sources,
                         mount::SourceAllowList::Create(options.config.allowed_sources,
                                                        options.config.allowed_endpoints));
  if (!co.allowed_sources.restricts_sources()) {
    spdlog::warn(
        "this worker serves any source the mount table in etcd names (no --allow-source): "
        "whoever can write etcd can make it read any file it can read (docs/security.md)");
  }
  co.record.capacity_bytes = store_->Stats().capacity_bytes;
  if (ufs_limiter_) co.ufs_limiters.push_back(ufs_limiter_);
  co.record.start_time_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count();
  CAIRN_ASSIGN_OR_RETURN(
      cluster_, ClusterAgent::Start(std::move(co), service_.get(), page_rules_.get(), store_.get(),
                                    registry_.get(), nullptr));
  return Status::Ok();
}

void Worker::RegisterStoreMetrics() {
  pagestore::PageStore* store = store_.get();
  auto add = [&](const char* name, const char* help, metrics::MetricType type,
                 uint64_t pagestore::PageStoreStats::*field) {
    registry_->AddCallback(name, help, type,
                           [store, field] { return static_cast<double>(store->Stats().*field); });
  };
  add("cairn_cache_used_bytes", "Bytes used in the cache folders (pages, headers, reservations)",
      metrics::MetricType::kGauge, &pagestore::PageStoreStats::used_bytes);
  add("cairn_cache_capacity_bytes", "Byte capacity of the cache folders",
      metrics::MetricType::kGauge, &pagestore::PageStoreStats::capacity_bytes);
  add("cairn_cache_pages", "Pages held in the cache", metrics::MetricType::kGauge,
      &pagestore::PageStoreStats::pages);
  add("cairn_cache_evictions_total", "Pages evicted to make room", metrics::MetricType::kCounter,
      &pagestore::PageStoreStats::evictions);
  add("cairn_cache_corrupt_pages_total",
      "Cached pages dropped because a check failed (header, length, key)",
      metrics::MetricType::kCounter, &pagestore::PageStoreStats::corrupt_pages);
  add("cairn_cache_recovered_pages", "Pages found on disk at startup", metrics::MetricType::kGauge,
      &pagestore::PageStoreStats::recovered_pages);
  add("cairn_cache_pinned_bytes", "Bytes of pinned pages (never evicted)",
      metrics::MetricType::kGauge, &pagestore::PageStoreStats::pinned_bytes);
  // Pages leaving the cache, by reason (one family, so a dashboard can stack them).
  const std::pair<const char*, uint64_t pagestore::PageStoreStats::*> reasons[] = {
      {"capacity", &pagestore::PageStoreStats::capacity_evictions},
      {"quota", &pagestore::PageStoreStats::quota_evictions},
      {"ttl", &pagestore::PageStoreStats::expired_pages},
      {"freed", &pagestore::PageStoreStats::freed_pages},
      {"invalidated", &pagestore::PageStoreStats::invalidated_pages},
      {"corrupt", &pagestore::PageStoreStats::corrupt_pages}};
  for (const auto& [reason, field] : reasons) {
    registry_->AddCallback(
        "cairn_cache_removals_total", "Pages removed from the cache, by reason",
        metrics::MetricType::kCounter,
        [store, field = field] { return static_cast<double>(store->Stats().*field); },
        {{"reason", reason}});
  }
}

void Worker::RegisterLimiterMetrics() {
  if (!ufs_limiter_) return;
  ufs::UfsLimiter* l = ufs_limiter_.get();
  using metrics::MetricType;
  registry_->AddCallback("cairn_worker_ufs_in_flight", "Source requests in flight (worker cap)",
                         MetricType::kGauge, [l] { return double(l->stats().in_flight); });
  registry_->AddCallback("cairn_worker_ufs_queued", "Source requests waiting for the worker cap",
                         MetricType::kGauge, [l] { return double(l->stats().queued); });
  registry_->AddCallback("cairn_worker_ufs_cap_waits_total",
                         "Source requests that waited for the worker cap", MetricType::kCounter,
                         [l] { return double(l->stats().waits); });
  registry_->AddCallback("cairn_worker_ufs_cap_wait_seconds_total",
                         "Time source requests spent waiting for the worker cap",
                         MetricType::kCounter, [l] { return l->stats().wait_micros_total / 1e6; });
  registry_->AddCallback("cairn_worker_ufs_throttled_total",
                         "SlowDown/503 answers that halved the concurrency cap",
                         MetricType::kCounter, [l] { return double(l->stats().throttled_events); });
  registry_->AddCallback("cairn_worker_ufs_effective_concurrency",
                         "Current concurrency cap after SlowDown adaptation (0 = unlimited)",
                         MetricType::kGauge, [l] { return double(l->stats().effective_limit); });
}

Worker::~Worker() { Stop(); }

void Worker::Stop() {
  // Leave the ring first: clients move to other workers before this one stops answering.
  if (cluster_) cluster_->Stop();
  if (server_) server_->Stop();
  if (http_) http_->Stop();
}

}  // namespace cairn::worker
