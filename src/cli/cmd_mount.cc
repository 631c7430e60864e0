// `cairn fuse` (a FUSE client of remote workers) and `cairn up` (worker + FUSE mount in one
// process: the embedded default).
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <memory>
#include <thread>

#include "cairn/client.h"
#include "cli/commands.h"
#include "cli/client_metrics.h"
#include "cli/common.h"
#include "common/units.h"
#include "common/uri.h"
#include "fuse/fuse_mount.h"
#include "mount/mount_table.h"
#include "ufs/ufs.h"
#include "worker/worker.h"

namespace cairn::cli {
namespace {

struct MountFlags {
  SourceFlags source;
  std::string mountpoint;
  std::string metrics_listen;  // cairn fuse only: the client's own metrics.
  std::string metrics_insecure_plaintext;
  bool allow_other = false;
  int threads = 16;
  bool debug = false;
};

void AddMountFlags(CLI::App* cmd, MountFlags* f) {
  cmd->add_flag("--allow-other", f->allow_other, "Let other users read the mount");
  cmd->add_option("--threads", f->threads, "FUSE worker threads (default 16)")
      ->check(CLI::Range(1, 1024));
  cmd->add_flag("--fuse-debug", f->debug, "Log every FUSE request");
  cmd->add_option("--metrics-insecure-plaintext", f->metrics_insecure_plaintext,
                  "Serve --metrics-listen without TLS on a non-loopback address, for the reason "
                  "given (logged)");
}

Status CheckMountpoint(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    return NotFoundError("mount point " + path + " does not exist (create it with mkdir -p)");
  }
  if (!S_ISDIR(st.st_mode)) return InvalidArgumentError("mount point " + path + " is not a folder");
  return Status::Ok();
}

// Checks every mount's source answers, so a typo'd endpoint or bad key fails at start with a
// clear message instead of as EIO on the first read.
Status ProbeSources(const std::vector<MountSpec>& mounts) {
  CAIRN_ASSIGN_OR_RETURN(auto table, mount::MountTable::Create(mounts));
  for (const auto& m : table->mounts()) {
    Status s = ufs::Probe(*m->ufs);
    if (!s.ok()) return s.WithContext("source " + m->spec.uri);
  }
  return Status::Ok();
}

// Whether the FUSE mount must be read-write: a write-through mount is configured, or the mount
// table comes from etcd (where a mount may become write-through later).
bool AnyWritable(const config::Config& cfg) {
  if (!cfg.client.etcd_endpoints.empty()) return true;
  for (const MountSpec& m : cfg.client.mounts) {
    if (!m.read_only) return true;
  }
  return false;
}

// Serves the client on the mount point until a termination signal arrives.
int ServeMount(Client* client, const MountFlags& f, bool writable) {
  fuse::FuseOptions fo;
  fo.mountpoint = f.mountpoint;
  fo.writable = writable;
  fo.allow_other = f.allow_other;
  fo.max_threads = f.threads;
  fo.debug = f.debug;
  fo.install_signal_handlers = false;  // The SignalHandler below owns them.
  auto mount = fuse::FuseMount::Mount(client, fo);
  if (!mount.ok()) return Fail(mount.status());
  fuse::FuseMount* m = mount->get();
  Status s;
  {
    // Signals are blocked in every thread (see main); this thread receives them.
    SignalHandler signals([m](int sig) {
      spdlog::info("signal {} received; unmounting", sig);
      m->RequestStop();
    });
    spdlog::info("serving {} (Ctrl-C to unmount)", f.mountpoint);
    s = m->Run();
  }
  mount->reset();
  if (!s.ok()) return Fail(s);
  return kExitOk;
}

struct UpFlags {
  MountFlags mount;
  std::string source_uri;
  std::string mount_path = "/";
  std::string cache_dir;
  std::string cache_size;
  std::string metrics_listen;
  std::string listen;
  std::string source_read_size;
};

StatusOr<worker::WorkerOptions> BuildUpWorker(const UpFlags& f, config::Config* cfg) {
  CAIRN_ASSIGN_OR_RETURN(Uri uri, ParseUri(f.source_uri));
  MountSpec spec;
  spec.path = f.mount_path;
  spec.uri = uri.ToString();
  CAIRN_RETURN_IF_ERROR(ApplyMountFlags(f.mount.source, &spec));
  SourceFlags source = f.mount.source;
  source.mounts.clear();
  if (source.config_path.empty()) {
    cfg->client.mounts = {spec};
  } else {
    CAIRN_ASSIGN_OR_RETURN(*cfg, config::LoadConfigFile(source.config_path));
    cfg->client.mounts = {spec};
  }
  if (!source.page_size.empty()) {
    auto ps = ParseBytes(source.page_size);
    if (!ps.ok()) return ps.status().WithContext("--page-size");
    if (*ps == 0 || *ps > (16u << 20) || *ps % (64 * 1024) != 0) {
      return InvalidArgumentError("--page-size must be a multiple of 64KiB up to 16MiB");
    }
    cfg->client.page_size = static_cast<uint32_t>(*ps);
  }
  worker::WorkerOptions wo;
  wo.mounts = cfg->client.mounts;
  wo.page_size = cfg->client.page_size;
  wo.serve_tcp = !f.listen.empty();
  wo.config.listen = f.listen;
  // --listen serves this node's cache to other clients: TLS as for `cairn worker`.
  wo.tls = cfg->client.tls;
  if (!source.tls_ca.empty()) wo.tls = {source.tls_ca, source.tls_cert, source.tls_key};
  if (source.tls_ca.empty() && (!source.tls_cert.empty() || !source.tls_key.empty())) {
    return InvalidArgumentError("--tls-cert/--tls-key need --tls-ca (the CA to trust)");
  }
  wo.config.metrics_listen = f.metrics_listen;
  if (!f.mount.metrics_insecure_plaintext.empty()) {
    wo.config.metrics_insecure_plaintext = f.mount.metrics_insecure_plaintext;
  }
  wo.config.id = "local";
  std::string dir = f.cache_dir.empty() ? DefaultCacheDir() : f.cache_dir;
  uint64_t capacity = 0;
  if (!f.cache_size.empty()) {
    auto size = ParseBytes(f.cache_size);
    if (!size.ok()) return size.status().WithContext("--cache-size");
    if (*size < 2ull * cfg->client.page_size) {
      return InvalidArgumentError("--cache-size must hold at least two pages");
    }
    capacity = *size;
  } else {
    CAIRN_ASSIGN_OR_RETURN(capacity, DefaultCacheCapacity(dir));
  }
  wo.config.cache_dirs.push_back({dir, capacity});
  if (!f.source_read_size.empty()) {
    CAIRN_ASSIGN_OR_RETURN(wo.source_read_bytes, ParseSourceReadSize(f.source_read_size));
  }
  return wo;
}

}  // namespace

Runner RegisterFuse(CLI::App* app) {
  auto f = std::make_shared<MountFlags>();
  CLI::App* cmd = app->add_subcommand("fuse", "Mount the namespace with FUSE, reading via workers");
  cmd->add_option("MOUNTPOINT", f->mountpoint, "Empty folder to mount on")->required();
  AddSourceFlags(cmd, &f->source, /*with_workers=*/true);
  AddEtcdFlag(cmd, &f->source.etcd);
  AddMountFlags(cmd, f.get());
  cmd->add_option("--metrics-listen", f->metrics_listen,
                  "Serve the client's Prometheus /metrics and /healthz here, e.g. 127.0.0.1:9101");
  return [f]() -> int {
    Status s = CheckMountpoint(f->mountpoint);
    if (!s.ok()) return Fail(s);
    auto cfg = BuildConfig(f->source);
    if (!cfg.ok()) return Fail(cfg.status());
    if (cfg->client.workers.empty() && cfg->client.etcd_endpoints.empty()) {
      spdlog::warn("no workers given: every read goes straight to the source");
    }
    auto client = Client::Create(cfg->client);
    if (!client.ok()) return Fail(client.status());
    std::unique_ptr<ClientMetricsServer> metrics;
    if (!f->metrics_listen.empty()) {
      auto started = ClientMetricsServer::Start(client->get(), f->metrics_listen,
                                                f->metrics_insecure_plaintext);
      if (!started.ok()) return Fail(started.status());
      metrics = std::move(started).value();
    }
    int rc = ServeMount(client->get(), *f, AnyWritable(*cfg));
    metrics.reset();
    return rc;
  };
}

Runner RegisterUp(CLI::App* app) {
  auto f = std::make_shared<UpFlags>();
  CLI::App* cmd = app->add_subcommand(
      "up", "Run a worker and a FUSE mount of SOURCE in one process (single node, no etcd)");
  cmd->add_option("SOURCE", f->source_uri, "file:///path or s3://bucket/prefix")->required();
  cmd->add_option("MOUNTPOINT", f->mount.mountpoint, "Empty folder to mount on")->required();
  cmd->add_option("--mount-path", f->mount_path,
                  "Namespace path of the source under the mount point (default /)");
  cmd->add_option("--cache-dir", f->cache_dir, "Cache folder (default /var/cache/cairn as root)");
  cmd->add_option("--cache-size", f->cache_size,
                  "Cache capacity (default: half the free space, at most 100GiB)");
  cmd->add_option("--metrics-listen", f->metrics_listen,
                  "Serve Prometheus /metrics and /healthz here, e.g. 127.0.0.1:9100");
  cmd->add_option("--listen", f->listen,
                  "Also serve pages to other clients over TCP at this address");
  AddSourceReadSizeFlag(cmd, &f->source_read_size);
  AddSourceFlags(cmd, &f->mount.source, /*with_workers=*/false);
  AddMountFlags(cmd, &f->mount);
  return [f]() -> int {
    Status s = CheckMountpoint(f->mount.mountpoint);
    if (!s.ok()) return Fail(s);
    if (!f->mount.source.mounts.empty()) {
      return Fail(
          InvalidArgumentError("cairn up serves one SOURCE; use `cairn worker` and "
                               "`cairn fuse` for several mounts"));
    }
    config::Config cfg;
    auto wo = BuildUpWorker(*f, &cfg);
    if (!wo.ok()) return Fail(wo.status());
    s = ProbeSources(wo->mounts);
    if (!s.ok()) return Fail(s);
    auto w = worker::Worker::Start(std::move(wo).value());
    if (!w.ok()) return Fail(w.status());
    cfg.client.local_channel = (*w)->local_channel();
    auto client = Client::Create(cfg.client);
    if (!client.ok()) return Fail(client.status());
    int rc = ServeMount(client->get(), f->mount, AnyWritable(cfg));
    client->reset();
    (*w)->Stop();
    return rc;
  };
}

}  // namespace cairn::cli
