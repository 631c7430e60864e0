#include "cli/common.h"

#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "common/file_util.h"
#include "common/units.h"

namespace cairn::cli {

void AddSourceFlags(CLI::App* app, SourceFlags* f, bool with_workers) {
  app->add_option("--config", f->config_path, "JSON config file (see docs/configuration.md)");
  app->add_option("--mount", f->mounts, "Mount PATH=URI, e.g. /lake=s3://bucket/prefix (repeat)");
  app->add_option("--write-mode", f->write_mode,
                  "Write mode of the --mount mounts: read-only (default), through (writes "
                  "reach the source before close returns) or back (close returns once the "
                  "file is in the worker's journal); a config file sets it per mount");
  if (with_workers) {
    app->add_option("--worker", f->workers, "Cache worker host:port (repeat)");
    app->add_option("--worker-timeout", f->worker_timeout,
                    "Deadline of one page request before failing over (default 5s)");
    app->add_flag("--no-short-circuit", f->no_short_circuit,
                  "Always ask workers over TCP, even one on this machine");
    app->add_flag("--no-cache", f->no_cache,
                  "One-pass scan: workers serve this client's misses without caching them");
    app->add_option("--token", f->token,
                    "Job token (`cairn token issue`): the workers authorize this client as its "
                    "principal. Prefer $CAIRN_TOKEN or --token-file: a flag shows in ps")
        ->envname("CAIRN_TOKEN");
    app->add_option("--token-file", f->token_file, "Read the job token from this file")
        ->envname("CAIRN_TOKEN_FILE");
    app->add_flag("--metadata-via-workers", f->metadata_via_workers,
                  "Ask the workers for stat and listings (with their source credentials, "
                  "filtered by this client's grants) instead of the sources");
  }
  app->add_option("--write-room-wait", f->write_room_wait,
                  "How long a write, or an open that keeps the file's content, waits for room on "
                  "a worker whose write-back budget (or spool disk) is full before it fails with "
                  "ENOSPC (default 60s)");
  AddTlsFlags(app, &f->tls_ca, &f->tls_cert, &f->tls_key);
  app->add_option("--page-size", f->page_size, "Cache page size (default 1MiB)");
  app->add_option("--metadata-ttl", f->metadata_ttl,
                  "How long stat/list results are trusted (default 60s; 0 = always ask)");
  app->add_option("--endpoint", f->endpoint, "S3 endpoint URL, e.g. http://127.0.0.1:9000");
  app->add_option("--region", f->region, "S3 region (default us-east-1)");
  app->add_option("--access-key", f->access_key, "S3 access key (default: AWS env/files)");
  app->add_option("--secret-key", f->secret_key, "S3 secret key (default: AWS env/files)");
  app->add_option("--profile", f->profile, "AWS profile in ~/.aws/credentials");
  app->add_flag("--virtual-hosted", f->virtual_hosted,
                "Use virtual-hosted-style S3 addressing (default: path style)");
}

bool ScrubSecretArguments(int argc, char** argv) {
  static constexpr std::string_view kFlags[] = {"--secret-key", "--token"};
  bool found = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg(argv[i]);
    char* value = nullptr;
    for (std::string_view flag : kFlags) {
      if (arg == flag && i + 1 < argc) {
        value = argv[++i];
      } else if (arg.size() > flag.size() && arg.starts_with(flag) && arg[flag.size()] == '=') {
        value = argv[i] + flag.size() + 1;
      }
      if (value != nullptr) break;
    }
    if (value == nullptr) continue;
    for (char* p = value; *p != '\0'; ++p) *p = '*';
    found = true;
  }
  return found;
}

void AddTlsFlags(CLI::App* app, std::string* ca, std::string* cert, std::string* key) {
  app->add_option("--tls-ca", *ca,
                  "TLS: CA certificates (PEM) that sign the cluster's certificates; turns TLS on "
                  "(docs/security.md)")
      ->envname("CAIRN_TLS_CA");
  app->add_option("--tls-cert", *cert,
                  "TLS: this process's certificate (PEM); its common name is the principal")
      ->envname("CAIRN_TLS_CERT");
  app->add_option("--tls-key", *key, "TLS: the private key of --tls-cert (PEM)")
      ->envname("CAIRN_TLS_KEY");
}

void AddEtcdFlag(CLI::App* app, EtcdFlags* etcd) {
  app->add_option("--etcd", etcd->endpoints,
                  "Cluster mode: etcd endpoints, e.g. https://10.0.0.1:2379,https://10.0.0.2:2379 "
                  "(workers and mounts then come from etcd)")
      ->envname("CAIRN_ETCD");
  app->add_option("--etcd-ca", etcd->ca,
                  "CA certificates (PEM) that sign etcd's certificate (https; default: the "
                  "system's)")
      ->envname("CAIRN_ETCD_CA");
  app->add_option("--etcd-cert", etcd->cert,
                  "Client certificate (PEM) for an etcd that requires one (--client-cert-auth)")
      ->envname("CAIRN_ETCD_CERT");
  app->add_option("--etcd-key", etcd->key, "The private key of --etcd-cert (PEM)")
      ->envname("CAIRN_ETCD_KEY");
  app->add_option("--etcd-insecure-plaintext", etcd->insecure_plaintext,
                  "Talk plaintext http:// to an etcd beyond loopback, for the reason given "
                  "(logged); without it such an endpoint is refused")
      ->envname("CAIRN_ETCD_INSECURE_PLAINTEXT");
}

StatusOr<std::string> NormalizeEtcdEndpoints(const std::string& flag) {
  std::string out;
  size_t start = 0;
  while (start <= flag.size()) {
    size_t comma = flag.find(',', start);
    if (comma == std::string::npos) comma = flag.size();
    std::string one = flag.substr(start, comma - start);
    start = comma + 1;
    if (one.empty()) continue;
    if (one.find("://") == std::string::npos) one = "http://" + one;
    if (one.rfind("http://", 0) != 0 && one.rfind("https://", 0) != 0) {
      return InvalidArgumentError("--etcd: '" + one + "' is not an http(s) URL");
    }
    if (!out.empty()) out += ',';
    out += one;
  }
  if (out.empty()) return InvalidArgumentError("--etcd: no endpoint given");
  return out;
}

StatusOr<std::unique_ptr<membership::EtcdCoordination>> ConnectEtcd(const EtcdFlags& flags) {
  if (flags.empty()) {
    return InvalidArgumentError("no etcd given: pass --etcd URL or set CAIRN_ETCD");
  }
  membership::EtcdOptions eo;
  CAIRN_ASSIGN_OR_RETURN(eo.endpoints, NormalizeEtcdEndpoints(flags.endpoints));
  eo.tls = {flags.ca, flags.cert, flags.key};
  eo.insecure_plaintext = flags.insecure_plaintext;
  eo.request_timeout_ms = 5000;
  return membership::EtcdCoordination::Create(eo);
}

Status ApplyMountFlags(const SourceFlags& f, MountSpec* spec) {
  auto set = [&](const char* name, const std::string& value) {
    if (!value.empty()) spec->options[name] = value;
  };
  set("endpoint", f.endpoint);
  set("region", f.region);
  set("access_key", f.access_key);
  set("secret_key", f.secret_key);
  set("profile", f.profile);
  if (f.virtual_hosted) spec->options["path_style"] = "false";
  if (!f.metadata_ttl.empty()) {
    auto ttl = ParseDuration(f.metadata_ttl);
    if (!ttl.ok()) return ttl.status().WithContext("--metadata-ttl");
    spec->metadata_ttl = *ttl;
  }
  if (!f.write_mode.empty()) {
    CAIRN_RETURN_IF_ERROR(config::ApplyWriteMode(f.write_mode, spec).WithContext("--write-mode"));
  }
  return Status::Ok();
}

StatusOr<config::Config> BuildConfig(const SourceFlags& f) {
  config::Config cfg;
  if (!f.config_path.empty()) {
    CAIRN_ASSIGN_OR_RETURN(cfg, config::LoadConfigFile(f.config_path));
  }
  for (const std::string& m : f.mounts) {
    CAIRN_ASSIGN_OR_RETURN(MountSpec spec, config::ParseMountFlag(m));
    CAIRN_RETURN_IF_ERROR(ApplyMountFlags(f, &spec));
    cfg.client.mounts.push_back(std::move(spec));
  }
  for (const std::string& w : f.workers) cfg.client.workers.push_back(w);
  if (!f.etcd.empty()) cfg.client.etcd_endpoints = f.etcd.endpoints;
  // Flags override the config file's etcd TLS settings one by one.
  if (!f.etcd.ca.empty()) cfg.client.etcd_tls.ca_file = f.etcd.ca;
  if (!f.etcd.cert.empty()) cfg.client.etcd_tls.cert_file = f.etcd.cert;
  if (!f.etcd.key.empty()) cfg.client.etcd_tls.key_file = f.etcd.key;
  if (!f.etcd.insecure_plaintext.empty()) {
    cfg.client.etcd_insecure_plaintext = f.etcd.insecure_plaintext;
  }
  if (!cfg.client.etcd_endpoints.empty()) {
    CAIRN_ASSIGN_OR_RETURN(cfg.client.etcd_endpoints,
                           NormalizeEtcdEndpoints(cfg.client.etcd_endpoints));
    if (!cfg.client.mounts.empty() || !cfg.client.workers.empty()) {
      return InvalidArgumentError(
          "--etcd: mounts and workers come from etcd; do not also give --mount or --worker "
          "(add mounts with `cairn mount add`)");
    }
  }
  if (f.no_short_circuit) cfg.client.short_circuit = false;
  if (!f.tls_ca.empty()) cfg.client.tls.ca_file = f.tls_ca;
  if (!f.tls_cert.empty()) cfg.client.tls.cert_file = f.tls_cert;
  if (!f.tls_key.empty()) cfg.client.tls.key_file = f.tls_key;
  if (!cfg.client.tls.enabled() &&
      (!cfg.client.tls.cert_file.empty() || !cfg.client.tls.key_file.empty())) {
    return InvalidArgumentError("--tls-cert/--tls-key need --tls-ca (the CA to trust)");
  }
  if (cfg.client.tls.cert_file.empty() != cfg.client.tls.key_file.empty()) {
    return InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (!f.token.empty() && !f.token_file.empty()) {
    return InvalidArgumentError("give the token by --token or --token-file, not both");
  }
  if (!f.token_file.empty()) {
    StatusOr<std::string> token = ReadSmallFile(f.token_file, 64 << 10);
    if (!token.ok()) return token.status().WithContext("--token-file");
    cfg.client.token = std::move(token).value();
    while (!cfg.client.token.empty() &&
           std::isspace(static_cast<unsigned char>(cfg.client.token.back()))) {
      cfg.client.token.pop_back();
    }
    if (cfg.client.token.empty()) return InvalidArgumentError("--token-file: the file is empty");
  } else if (!f.token.empty()) {
    cfg.client.token = f.token;
  }
  if (f.no_cache) cfg.client.no_cache = true;
  if (f.metadata_via_workers) cfg.client.metadata_via_workers = true;
  if (!f.page_size.empty()) {
    auto ps = ParseBytes(f.page_size);
    if (!ps.ok()) return ps.status().WithContext("--page-size");
    if (*ps == 0 || *ps > (16u << 20) || *ps % (64 * 1024) != 0) {
      return InvalidArgumentError("--page-size must be a multiple of 64KiB up to 16MiB");
    }
    cfg.client.page_size = static_cast<uint32_t>(*ps);
  }
  if (!f.worker_timeout.empty()) {
    auto d = ParseDuration(f.worker_timeout);
    if (!d.ok()) return d.status().WithContext("--worker-timeout");
    cfg.client.worker_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(*d);
    if (cfg.client.worker_timeout.count() <= 0) {
      return InvalidArgumentError("--worker-timeout must be at least 1ms");
    }
  }
  if (!f.write_room_wait.empty()) {
    auto d = ParseDuration(f.write_room_wait);
    if (!d.ok()) return d.status().WithContext("--write-room-wait");
    if (*d > std::chrono::hours(24)) {
      return InvalidArgumentError("--write-room-wait is at most 24h");
    }
    cfg.client.write_room_wait = std::chrono::duration_cast<std::chrono::milliseconds>(*d);
  }
  if (cfg.client.mounts.empty() && cfg.client.etcd_endpoints.empty()) {
    return InvalidArgumentError(
        "no mounts: give --mount PATH=URI, --config FILE, or --etcd URL (cluster mode)");
  }
  return cfg;
}

int Fail(const Status& status) {
  std::fprintf(stderr, "cairn: error: %s\n",
               status.message().empty() ? status.ToString().c_str() : status.message().c_str());
  return kExitError;
}

std::string DefaultCacheDir() {
  if (geteuid() == 0) return "/var/cache/cairn";
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    return std::string(xdg) + "/cairn";
  }
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/cairn";
}

StatusOr<uint32_t> ParseSourceReadSize(const std::string& text) {
  auto size = ParseBytes(text);
  if (!size.ok()) return size.status().WithContext("--source-read-size");
  if (*size > (64u << 20)) return InvalidArgumentError("--source-read-size must be at most 64MiB");
  return static_cast<uint32_t>(*size);
}

void AddSourceReadSizeFlag(CLI::App* cmd, std::string* value) {
  cmd->add_option("--source-read-size", *value,
                  "Most bytes one source request reads for a sequential reader: a miss also "
                  "reads the next pages (default 4MiB; 0: one page per request)");
}

StatusOr<uint64_t> DefaultCacheCapacity(const std::string& dir) {
  std::filesystem::path p(dir);
  while (!p.empty() && !std::filesystem::exists(p)) p = p.parent_path();
  struct statvfs vfs {};
  if (p.empty() || statvfs(p.c_str(), &vfs) != 0) {
    return InvalidArgumentError("cannot find the file system of cache folder " + dir);
  }
  uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  uint64_t capacity = std::min<uint64_t>(free_bytes / 2, 100ull << 30);
  if (capacity < (64ull << 20)) {
    return ResourceExhaustedError("only " + FormatBytes(free_bytes) + " free for cache folder " +
                                  dir + "; give --cache-size or free some space");
  }
  return capacity;
}

uint64_t RaiseOpenFileLimit() {
  struct rlimit limit {};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    struct rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return limit.rlim_cur;
}

}  // namespace cairn::cli
