// Cluster commands over etcd: `cairn mount add|ls|rm` (the shared mount table) and
// `cairn status` (workers and mounts, as a table or --json).
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/metrics_scrape.h"
#include "common/units.h"
#include "config/config.h"
#include "membership/etcd_coordination.h"
#include "membership/mount_store.h"
#include "membership/records.h"
#include "mount/mount_table.h"

namespace cairn::cli {
namespace {

std::string FormatTtl(std::chrono::microseconds ttl) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(ttl).count();
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

nlohmann::json MountJson(const MountSpec& m) {
  return {{"path", m.path},
          {"uri", m.uri},
          {"options", m.options},
          {"metadata_ttl_ms",
           std::chrono::duration_cast<std::chrono::milliseconds>(m.metadata_ttl).count()},
          {"replicas", m.replicas},
          {"read_only", m.read_only},
          {"write_mode", config::WriteModeName(m)}};
}

// ---- cairn mount add|ls|rm ----

struct MountCmdFlags {
  EtcdFlags etcd;
  std::string path;
  std::string uri;
  std::vector<std::string> options;  // key=value
  std::string endpoint, region, profile;
  bool virtual_hosted = false;
  std::string metadata_ttl;
  int replicas = 1;
  std::string write_mode = "read-only";
  bool replace = false;
  bool json = false;
};

StatusOr<MountSpec> SpecFromFlags(const MountCmdFlags& f) {
  CAIRN_ASSIGN_OR_RETURN(MountSpec spec, config::ParseMountFlag(f.path + "=" + f.uri));
  for (const std::string& kv : f.options) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgumentError("--option must be KEY=VALUE, got '" + kv + "'");
    }
    spec.options[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (!f.endpoint.empty()) spec.options["endpoint"] = f.endpoint;
  if (!f.region.empty()) spec.options["region"] = f.region;
  if (!f.profile.empty()) spec.options["profile"] = f.profile;
  if (f.virtual_hosted) spec.options["path_style"] = "false";
  if (!f.metadata_ttl.empty()) {
    auto ttl = ParseDuration(f.metadata_ttl);
    if (!ttl.ok()) return ttl.status().WithContext("--metadata-ttl");
    spec.metadata_ttl = *ttl;
  }
  spec.replicas = f.replicas;
  CAIRN_RETURN_IF_ERROR(config::ApplyWriteMode(f.write_mode, &spec).WithContext("--write-mode"));
  // Catches unknown options and bad values here, with the option's name, not on the workers.
  CAIRN_RETURN_IF_ERROR(mount::UfsOptionsFromSpec(spec).status());
  return spec;
}

int RunMountAdd(const MountCmdFlags& f) {
  auto spec = SpecFromFlags(f);
  if (!spec.ok()) return Fail(spec.status());
  auto etcd = ConnectEtcd(f.etcd);
  if (!etcd.ok()) return Fail(etcd.status());
  membership::MountStore store(etcd->get());
  Status s = store.Add(*spec, f.replace);
  if (!s.ok()) return Fail(s);
  std::printf("mounted %s -> %s\n", spec->path.c_str(), spec->uri.c_str());
  return kExitOk;
}

int RunMountRm(const MountCmdFlags& f) {
  auto path = mount::NormalizePath(f.path);
  if (!path.ok()) return Fail(path.status());
  auto etcd = ConnectEtcd(f.etcd);
  if (!etcd.ok()) return Fail(etcd.status());
  membership::MountStore store(etcd->get());
  Status s = store.Remove(*path);
  if (!s.ok()) return Fail(s);
  std::printf("unmounted %s\n", path->c_str());
  return kExitOk;
}

void PrintMountTable(const std::vector<MountSpec>& mounts) {
  std::printf("%-24s %-40s %-8s %-8s %s\n", "PATH", "SOURCE", "TTL", "REPLICAS", "OPTIONS");
  for (const MountSpec& m : mounts) {
    std::string opts;
    for (const auto& [k, v] : m.options) opts += (opts.empty() ? "" : ",") + k + "=" + v;
    std::printf("%-24s %-40s %-8s %-8d %s\n", m.path.c_str(), m.uri.c_str(),
                FormatTtl(m.metadata_ttl).c_str(), m.replicas, opts.c_str());
  }
}

int RunMountLs(const MountCmdFlags& f) {
  auto etcd = ConnectEtcd(f.etcd);
  if (!etcd.ok()) return Fail(etcd.status());
  membership::MountStore store(etcd->get());
  auto mounts = store.List();
  if (!mounts.ok()) return Fail(mounts.status());
  if (f.json) {
    nlohmann::json all = nlohmann::json::array();
    for (const MountSpec& m : *mounts) all.push_back(MountJson(m));
    std::printf("%s\n", all.dump(2).c_str());
  } else {
    PrintMountTable(*mounts);
  }
  return kExitOk;
}

// ---- cairn status ----

struct WorkerStatus {
  membership::WorkerRecord record;
  std::string state = "up";  // up | no-metrics | unreachable
  std::string error;
  double capacity = 0, used = 0, pages = 0, hits = 0, misses = 0;
  // Write-back: closed files not yet in their sources, and the age of the oldest.
  double pending_files = 0, pending_bytes = 0, oldest_pending_s = 0, failing = 0;
};

WorkerStatus ProbeWorker(const membership::WorkerRecord& record, const TlsSettings& tls) {
  WorkerStatus w;
  w.record = record;
  w.capacity = static_cast<double>(record.capacity_bytes);
  if (record.metrics_address.empty()) {
    w.state = "no-metrics";
    return w;
  }
  auto text = FetchMetrics(record, tls);
  if (!text.ok()) {
    w.state = "unreachable";
    w.error = text.status().message();
    return w;
  }
  w.capacity = SumMetric(*text, "cairn_cache_capacity_bytes");
  w.used = SumMetric(*text, "cairn_cache_used_bytes");
  w.pages = SumMetric(*text, "cairn_cache_pages");
  w.hits = SumMetric(*text, "cairn_worker_cache_hits_total");
  w.misses = SumMetric(*text, "cairn_worker_cache_misses_total");
  w.pending_files = SumMetric(*text, "cairn_worker_write_back_pending_files");
  w.pending_bytes = SumMetric(*text, "cairn_worker_write_back_pending_bytes");
  w.oldest_pending_s = SumMetric(*text, "cairn_worker_write_back_oldest_pending_seconds");
  w.failing = SumMetric(*text, "cairn_worker_write_back_failing_files");
  return w;
}

struct StatusFlags {
  EtcdFlags etcd;
  TlsSettings tls;  // For workers whose metrics endpoint is TLS.
  bool json = false;
};

int RunStatus(const StatusFlags& f) {
  auto etcd = ConnectEtcd(f.etcd);
  if (!etcd.ok()) return Fail(etcd.status());
  auto listed = (*etcd)->GetPrefix(membership::kWorkersPrefix);
  if (!listed.ok()) return Fail(listed.status().WithContext("reading workers from etcd"));
  membership::MountStore store(etcd->get());
  auto mounts = store.List();
  if (!mounts.ok()) return Fail(mounts.status());
  std::vector<WorkerStatus> workers;
  for (const membership::KeyValue& kv : listed->entries) {
    auto record = membership::DecodeWorkerRecord(kv.value);
    if (!record.ok()) {
      std::fprintf(stderr, "cairn: warning: bad worker record %s: %s\n", kv.key.c_str(),
                   record.status().ToString().c_str());
      continue;
    }
    workers.push_back(ProbeWorker(*record, f.tls));
  }
  auto ratio = [](const WorkerStatus& w) {
    double total = w.hits + w.misses;
    return total > 0 ? w.hits / total : 0.0;
  };
  if (f.json) {
    nlohmann::json out;
    out["workers"] = nlohmann::json::array();
    for (const WorkerStatus& w : workers) {
      nlohmann::json j = {{"id", w.record.id},
                          {"address", w.record.address},
                          {"metrics_address", w.record.metrics_address},
                          {"metrics_tls", w.record.metrics_tls},
                          {"state", w.state},
                          {"capacity_bytes", static_cast<uint64_t>(w.capacity)},
                          {"used_bytes", static_cast<uint64_t>(w.used)},
                          {"pages", static_cast<uint64_t>(w.pages)},
                          {"hits", static_cast<uint64_t>(w.hits)},
                          {"misses", static_cast<uint64_t>(w.misses)},
                          {"hit_ratio", ratio(w)},
                          {"write_back_pending_files", static_cast<uint64_t>(w.pending_files)},
                          {"write_back_pending_bytes", static_cast<uint64_t>(w.pending_bytes)},
                          {"write_back_oldest_pending_seconds", w.oldest_pending_s},
                          {"write_back_failing_files", static_cast<uint64_t>(w.failing)},
                          {"start_time_unix_ms", w.record.start_time_unix_ms}};
      if (!w.error.empty()) j["error"] = w.error;
      out["workers"].push_back(j);
    }
    out["mounts"] = nlohmann::json::array();
    for (const MountSpec& m : *mounts) out["mounts"].push_back(MountJson(m));
    std::printf("%s\n", out.dump(2).c_str());
    return kExitOk;
  }
  std::printf("WORKERS (%zu)\n", workers.size());
  std::printf("%-20s %-22s %-12s %10s %10s %10s %6s %12s %8s\n", "ID", "ADDRESS", "STATE",
              "CAPACITY", "USED", "PAGES", "HIT%", "UNUPLOADED", "OLDEST");
  for (const WorkerStatus& w : workers) {
    std::printf("%-20s %-22s %-12s %10s %10s %10.0f %5.1f%% %12s %7.0fs%s\n", w.record.id.c_str(),
                w.record.address.c_str(), w.state.c_str(),
                FormatBytes(static_cast<uint64_t>(w.capacity)).c_str(),
                FormatBytes(static_cast<uint64_t>(w.used)).c_str(), w.pages, 100 * ratio(w),
                FormatBytes(static_cast<uint64_t>(w.pending_bytes)).c_str(), w.oldest_pending_s,
                w.failing > 0 ? "  (uploads failing)" : "");
  }
  std::printf("\nMOUNTS (%zu)\n", mounts->size());
  PrintMountTable(*mounts);
  return kExitOk;
}

}  // namespace

void RegisterClusterCommands(CLI::App* app, std::vector<std::pair<CLI::App*, Runner>>* out) {
  CLI::App* mount = app->add_subcommand("mount", "Edit the cluster's mount table in etcd");
  mount->require_subcommand(1);

  auto add_flags = std::make_shared<MountCmdFlags>();
  CLI::App* add = mount->add_subcommand("add", "Mount a source at a namespace path, everywhere");
  add->add_option("PATH", add_flags->path, "Namespace path, e.g. /data/bucket_a")->required();
  add->add_option("URI", add_flags->uri, "Source: s3://bucket/prefix or file:///path")->required();
  AddEtcdFlag(add, &add_flags->etcd);
  add->add_option("--option", add_flags->options,
                  "Source option KEY=VALUE (endpoint, region, profile, path_style, "
                  "max_retries, connect_timeout_ms, request_timeout_ms; repeat)");
  add->add_option("--endpoint", add_flags->endpoint, "S3 endpoint URL");
  add->add_option("--region", add_flags->region, "S3 region");
  add->add_option("--profile", add_flags->profile,
                  "AWS profile each node resolves from its own credentials file");
  add->add_flag("--virtual-hosted", add_flags->virtual_hosted, "Virtual-hosted-style S3 URLs");
  add->add_option("--metadata-ttl", add_flags->metadata_ttl,
                  "How long stat/list results are trusted (default 60s; 0 = always ask)");
  add->add_option("--replicas", add_flags->replicas, "Workers caching each page (default 1)")
      ->check(CLI::Range(1, 8));
  add->add_option("--write-mode", add_flags->write_mode,
                  "read-only (default), through (writes reach the source before close returns) "
                  "or back (close returns once the file is in the worker's journal; "
                  "docs/write-path.md)");
  add->add_flag("--replace", add_flags->replace, "Replace an existing mount at PATH");
  out->push_back({add, [add_flags] { return RunMountAdd(*add_flags); }});

  auto rm_flags = std::make_shared<MountCmdFlags>();
  CLI::App* rm = mount->add_subcommand("rm", "Remove a mount from the namespace");
  rm->add_option("PATH", rm_flags->path, "Namespace path of the mount")->required();
  AddEtcdFlag(rm, &rm_flags->etcd);
  out->push_back({rm, [rm_flags] { return RunMountRm(*rm_flags); }});

  auto ls_flags = std::make_shared<MountCmdFlags>();
  CLI::App* ls = mount->add_subcommand("ls", "List the mount table");
  AddEtcdFlag(ls, &ls_flags->etcd);
  ls->add_flag("--json", ls_flags->json, "JSON output");
  out->push_back({ls, [ls_flags] { return RunMountLs(*ls_flags); }});

  auto status_flags = std::make_shared<StatusFlags>();
  CLI::App* status = app->add_subcommand("status", "Show the cluster: workers and mounts");
  AddEtcdFlag(status, &status_flags->etcd);
  AddTlsFlags(status, &status_flags->tls.ca_file, &status_flags->tls.cert_file,
              &status_flags->tls.key_file);
  status->add_flag("--json", status_flags->json, "JSON output");
  out->push_back({status, [status_flags] { return RunStatus(*status_flags); }});
}

}  // namespace cairn::cli
