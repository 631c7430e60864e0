// `cairn worker`: a cache worker serving pages over TCP with metrics over HTTP.
#include <spdlog/spdlog.h>

#include <memory>

#include "cli/commands.h"
#include "cli/common.h"
#include "common/units.h"
#include "mount/mount_table.h"
#include "worker/worker.h"

namespace cairn::cli {
namespace {

struct WorkerFlags {
  SourceFlags source;
  std::vector<std::string> cache_dirs;
  std::string cache_size;
  std::string listen;
  std::string metrics_listen;
  std::string id;
  std::string eviction_policy;
  std::string advertise;
  int lease_ttl_s = 5;
  int ufs_max_concurrency = 0;
  std::string ufs_max_bandwidth;
  std::string write_back_budget;
  std::string write_back_delay;
  std::string write_idle_timeout;
  bool no_peer_fill = false;
  std::string source_read_size;
  std::string insecure_plaintext;
  std::string metrics_insecure_plaintext;
  bool metrics_allow_anonymous = false;
  std::vector<std::string> token_public_keys;
  std::vector<std::string> allowed_sources, allowed_endpoints;
};

Status BuildWorkerOptions(const WorkerFlags& f, worker::WorkerOptions* out) {
  CAIRN_ASSIGN_OR_RETURN(config::Config cfg, BuildConfig(f.source));
  config::WorkerConfig& w = cfg.worker;
  if (!f.listen.empty()) w.listen = f.listen;
  if (!f.metrics_listen.empty())
    w.metrics_listen = f.metrics_listen == "off" ? "" : f.metrics_listen;
  if (!f.id.empty()) w.id = f.id;
  if (!f.insecure_plaintext.empty()) w.insecure_plaintext = f.insecure_plaintext;
  if (!f.metrics_insecure_plaintext.empty()) {
    w.metrics_insecure_plaintext = f.metrics_insecure_plaintext;
  }
  if (f.metrics_allow_anonymous) w.metrics_allow_anonymous = true;
  if (!f.token_public_keys.empty()) w.token_public_keys = f.token_public_keys;
  if (!f.allowed_sources.empty()) w.allowed_sources = f.allowed_sources;
  if (!f.allowed_endpoints.empty()) w.allowed_endpoints = f.allowed_endpoints;
  if (!f.eviction_policy.empty()) w.eviction_policy = f.eviction_policy;
  uint64_t default_capacity = 0;
  if (!f.cache_size.empty()) {
    auto size = ParseBytes(f.cache_size);
    if (!size.ok()) return size.status().WithContext("--cache-size");
    if (*size == 0) return InvalidArgumentError("--cache-size must be greater than 0");
    default_capacity = *size;
  }
  std::vector<std::string> dirs = f.cache_dirs;
  if (dirs.empty() && w.cache_dirs.empty()) dirs.push_back(DefaultCacheDir());
  for (const std::string& d : dirs) {
    uint64_t cap = default_capacity;
    if (cap == 0 && d.find(':') == std::string::npos) {
      CAIRN_ASSIGN_OR_RETURN(cap, DefaultCacheCapacity(d));
    }
    CAIRN_ASSIGN_OR_RETURN(config::CacheDir dir, config::ParseCacheDirFlag(d, cap));
    w.cache_dirs.push_back(dir);
  }
  w.ufs_max_concurrency = f.ufs_max_concurrency;
  if (!f.ufs_max_bandwidth.empty()) {
    auto bw = ParseBytes(f.ufs_max_bandwidth);
    if (!bw.ok()) return bw.status().WithContext("--ufs-max-bandwidth (bytes per second)");
    w.ufs_max_bytes_per_second = *bw;
  }
  if (!f.write_back_budget.empty()) {
    auto budget = ParseBytes(f.write_back_budget);
    if (!budget.ok()) return budget.status().WithContext("--write-back-budget");
    if (*budget == 0) return InvalidArgumentError("--write-back-budget must be greater than 0");
    w.write_back_max_pending_bytes = *budget;
  }
  if (!f.write_back_delay.empty()) {
    auto delay = ParseDuration(f.write_back_delay);
    if (!delay.ok()) return delay.status().WithContext("--write-back-delay");
    if (*delay > std::chrono::hours(1)) {
      return InvalidArgumentError(
          "--write-back-delay is at most 1h (files wait that long in "
          "the journal before they start for the lake)");
    }
    w.write_back_delay = std::chrono::duration_cast<std::chrono::milliseconds>(*delay);
  }
  if (!f.write_idle_timeout.empty()) {
    auto idle = ParseDuration(f.write_idle_timeout);
    if (!idle.ok()) return idle.status().WithContext("--write-idle-timeout");
    if (*idle < std::chrono::seconds(1) || *idle > std::chrono::hours(24)) {
      return InvalidArgumentError("--write-idle-timeout is between 1s and 24h");
    }
    w.write_idle_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(*idle);
  }
  out->config = w;
  out->mounts = cfg.client.mounts;
  out->etcd_endpoints = cfg.client.etcd_endpoints;
  out->etcd_tls = cfg.client.etcd_tls;
  out->etcd_insecure_plaintext = cfg.client.etcd_insecure_plaintext;
  out->advertise_address = f.advertise;
  out->lease_ttl = std::chrono::seconds(f.lease_ttl_s);
  out->peer_fill = !f.no_peer_fill;
  if (!f.source_read_size.empty()) {
    CAIRN_ASSIGN_OR_RETURN(out->source_read_bytes, ParseSourceReadSize(f.source_read_size));
  }
  if (out->etcd_endpoints.empty() && !f.advertise.empty()) {
    return InvalidArgumentError("--advertise needs --etcd (it is the address registered there)");
  }
  out->page_size = cfg.client.page_size;
  out->tls = cfg.client.tls;
  out->serve_tcp = true;
  return Status::Ok();
}

}  // namespace

Runner RegisterWorker(CLI::App* app) {
  auto f = std::make_shared<WorkerFlags>();
  CLI::App* cmd = app->add_subcommand("worker", "Run a cache worker (serves pages over TCP)");
  AddSourceFlags(cmd, &f->source, /*with_workers=*/false);
  cmd->add_option("--cache-dir", f->cache_dirs,
                  "Cache folder, optionally DIR:SIZE (repeat for several disks)");
  cmd->add_option("--cache-size", f->cache_size,
                  "Capacity of each cache folder without a :SIZE (default: half the free space, "
                  "at most 100GiB)");
  cmd->add_option("--listen", f->listen, "Page service address (default 0.0.0.0:7070)");
  cmd->add_option("--metrics-listen", f->metrics_listen,
                  "Prometheus /metrics and /healthz address (default 0.0.0.0:9100; 'off')");
  cmd->add_option("--id", f->id, "Stable worker identity (default hostname:port)");
  cmd->add_option("--eviction-policy", f->eviction_policy, "Eviction policy (default lru)");
  AddEtcdFlag(cmd, &f->source.etcd);
  cmd->add_option("--advertise", f->advertise,
                  "Cluster mode: host:port clients use to reach this worker (default: the "
                  "--listen address, a wildcard host replaced by the host name)");
  cmd->add_option("--ufs-max-concurrency", f->ufs_max_concurrency,
                  "Cap on this worker's source requests in flight, all mounts together "
                  "(default: none; see docs/ufs.md)")
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--write-back-budget", f->write_back_budget,
                  "Bytes of closed files of write-back mounts that may wait for upload before "
                  "closes wait, then fail with ENOSPC (default: a quarter of the cache)");
  cmd->add_option("--write-back-delay", f->write_back_delay,
                  "How long a closed file of a write-back mount waits before its upload starts, "
                  "e.g. 0s, 1s, 30s (default 1s: a rename in that time moves the file instead "
                  "of waiting for its upload; cairn sync starts it at once)");
  cmd->add_option("--write-idle-timeout", f->write_idle_timeout,
                  "How long a file open for writing keeps its handle without a request from "
                  "its client, e.g. 3m (default); then the write is aborted. Clients that "
                  "hold a file open keep it alive within this time");
  cmd->add_option("--ufs-max-bandwidth", f->ufs_max_bandwidth,
                  "Cap on bytes per second this worker reads from the sources, e.g. 500MiB");
  cmd->add_option("--lease-ttl", f->lease_ttl_s,
                  "Cluster mode: seconds before a crashed worker leaves the ring (default 5)")
      ->check(CLI::Range(1, 3600));
  cmd->add_option("--token-public-key", f->token_public_keys,
                  "Accept job tokens signed by this key (PEM from `cairn token keygen`; repeat "
                  "while rotating keys). Without one, clients presenting a token are refused")
      ->check(CLI::ExistingFile);
  cmd->add_option("--allow-source", f->allowed_sources,
                  "Cluster mode: serve mounts from etcd only over this source prefix (repeat), "
                  "e.g. s3://bucket-a or file:///srv/lake; default: any (docs/security.md)");
  cmd->add_option(
      "--allow-endpoint", f->allowed_endpoints,
      "Cluster mode: S3 endpoint URL a mount from etcd may name (repeat); default: any");
  cmd->add_option("--insecure-plaintext", f->insecure_plaintext,
                  "Serve without TLS on a non-loopback address, for the reason given (logged; "
                  "e.g. \"isolated benchmark network\")");
  cmd->add_option("--metrics-insecure-plaintext", f->metrics_insecure_plaintext,
                  "Serve /metrics and /healthz without TLS on a non-loopback address although "
                  "the worker has TLS, for the reason given (logged)");
  cmd->add_flag("--metrics-allow-anonymous", f->metrics_allow_anonymous,
                "Over TLS, let /metrics be read without a client certificate (default: it needs "
                "one of the cluster's CA; /healthz never does)");
  AddSourceReadSizeFlag(cmd, &f->source_read_size);
  cmd->add_flag("--no-peer-fill", f->no_peer_fill,
                "Cluster mode: read every missing page from the source, even when a replica "
                "that has it is named (default: copy it from that replica; docs/cluster.md)");
  return [f]() -> int {
    worker::WorkerOptions options;
    Status s = BuildWorkerOptions(*f, &options);
    if (!s.ok()) return Fail(s);
    auto w = worker::Worker::Start(std::move(options));
    if (!w.ok()) return Fail(w.status());
    int sig = WaitForTerminationSignal();
    spdlog::info("signal {} received; stopping worker", sig);
    (*w)->Stop();
    return kExitOk;
  };
}

}  // namespace cairn::cli
