// `cairn report [PATH]`: per mount, across every worker in etcd: cached bytes (and, with
// --dataset-size, the share of the dataset), hit ratio by requests and by bytes, egress (bytes read
// from the source) and egress saved (bytes served from cache), source requests and requests saved,
// and the namespace prefixes the cache evicts most; as a table or --json. Numbers are the workers'
// counters since they started.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "cairn/client.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/metrics_scrape.h"
#include "common/units.h"
#include "membership/etcd_coordination.h"
#include "membership/mount_store.h"
#include "membership/records.h"
#include "mount/mount_table.h"
#include "policy/path_rules.h"

namespace cairn::cli {
namespace {

struct ReportFlags {
  EtcdFlags etcd;
  TlsSettings tls;   // For workers whose metrics endpoint is TLS.
  std::string path;  // Optional: only mounts at or under (or above) this path.
  bool json = false;
  bool dataset_size = false;
};

struct MountReport {
  double requests = 0, hits = 0, misses = 0;
  double bytes_from_cache = 0, bytes_from_ufs = 0, ufs_requests = 0;
  double cached_bytes = 0;
  double dataset_bytes = -1;               // -1: not measured.
  std::map<std::string, double> evicted;   // Bytes evicted, by namespace prefix.
  std::map<std::string, double> removals;  // Pages removed, by reason (capacity, quota, ...).

  std::vector<std::pair<std::string, double>> TopEvicted(size_t n) const {
    std::vector<std::pair<std::string, double>> v(evicted.begin(), evicted.end());
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    if (v.size() > n) v.resize(n);
    return v;
  }
};

// Bytes under `path`, listed through the client library (a LIST per folder page).
StatusOr<uint64_t> DatasetBytes(Client* client, const std::string& path) {
  uint64_t total = 0;
  CAIRN_RETURN_IF_ERROR(WalkFiles(client, path, [&](const std::string&, const FileInfo& info) {
    total += info.size;
    return true;
  }));
  return total;
}

std::string Percent(double part, double whole) {
  if (whole <= 0) return "-";
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%.1f%%", 100 * part / whole);
  return buf;
}

int RunReport(const ReportFlags& f) {
  auto etcd = ConnectEtcd(f.etcd);
  if (!etcd.ok()) return Fail(etcd.status());
  auto mounts = membership::MountStore(etcd->get()).List();
  if (!mounts.ok()) return Fail(mounts.status());
  auto listed = (*etcd)->GetPrefix(membership::kWorkersPrefix);
  if (!listed.ok()) return Fail(listed.status().WithContext("reading workers from etcd"));

  std::map<std::string, MountReport> report;
  for (const MountSpec& m : *mounts) {
    if (f.path.empty() || policy::PathCovers(f.path, m.path) ||
        policy::PathCovers(m.path, f.path)) {
      report[m.path];
    }
  }
  int unreachable = 0;
  for (const membership::KeyValue& kv : listed->entries) {
    auto record = membership::DecodeWorkerRecord(kv.value);
    if (!record.ok() || record->metrics_address.empty()) continue;
    auto text = FetchMetrics(*record, f.tls);
    if (!text.ok()) {
      ++unreachable;
      std::fprintf(stderr, "cairn: warning: worker %s: %s\n", record->id.c_str(),
                   text.status().message().c_str());
      continue;
    }
    auto add = [&](const char* name, double MountReport::*field) {
      for (const auto& [mount, v] : MetricByLabel(*text, name, "mount")) {
        auto it = report.find(mount);
        if (it != report.end()) it->second.*field += v;
      }
    };
    add("cairn_mount_requests_total", &MountReport::requests);
    add("cairn_mount_cache_hits_total", &MountReport::hits);
    add("cairn_mount_cache_misses_total", &MountReport::misses);
    add("cairn_mount_bytes_from_cache_total", &MountReport::bytes_from_cache);
    add("cairn_mount_bytes_from_ufs_total", &MountReport::bytes_from_ufs);
    add("cairn_mount_ufs_requests_total", &MountReport::ufs_requests);
    add("cairn_mount_cached_bytes", &MountReport::cached_bytes);
    for (const char* reason : {"capacity", "quota", "ttl", "freed"}) {
      for (const auto& [mount, v] :
           MetricByLabel(*text, "cairn_mount_removals_total", "mount", "reason", reason)) {
        auto it = report.find(mount);
        if (it != report.end()) it->second.removals[reason] += v;
      }
    }
    for (const auto& [prefix, v] :
         MetricByLabel(*text, "cairn_evicted_bytes_by_prefix_total", "prefix")) {
      for (auto& [mount, r] : report) {
        if (policy::PathCovers(mount, prefix)) r.evicted[prefix] += v;
      }
    }
  }
  if (f.dataset_size) {
    ClientOptions co;
    co.etcd_endpoints = (*etcd)->options().endpoints;
    co.etcd_tls = f.etcd.tls();
    co.etcd_insecure_plaintext = f.etcd.insecure_plaintext;
    auto client = Client::Create(co);
    if (!client.ok()) return Fail(client.status());
    for (auto& [path, r] : report) {
      auto bytes = DatasetBytes(client->get(), path);
      if (!bytes.ok()) return Fail(bytes.status().WithContext("listing " + path));
      r.dataset_bytes = static_cast<double>(*bytes);
    }
  }
  if (f.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& [path, r] : report) {
      nlohmann::json j = {
          {"mount", path},
          {"cached_bytes", static_cast<uint64_t>(r.cached_bytes)},
          {"requests", static_cast<uint64_t>(r.requests)},
          {"hits", static_cast<uint64_t>(r.hits)},
          {"misses", static_cast<uint64_t>(r.misses)},
          {"hit_ratio_requests", r.requests > 0 ? r.hits / r.requests : 0.0},
          {"bytes_from_cache", static_cast<uint64_t>(r.bytes_from_cache)},
          {"bytes_from_source", static_cast<uint64_t>(r.bytes_from_ufs)},
          {"hit_ratio_bytes", r.bytes_from_cache + r.bytes_from_ufs > 0
                                  ? r.bytes_from_cache / (r.bytes_from_cache + r.bytes_from_ufs)
                                  : 0.0},
          {"source_requests", static_cast<uint64_t>(r.ufs_requests)},
          {"source_requests_saved", static_cast<uint64_t>(r.hits)}};
      nlohmann::json top = nlohmann::json::array();
      for (const auto& [prefix, bytes] : r.TopEvicted(5)) {
        top.push_back({{"prefix", prefix}, {"evicted_bytes", static_cast<uint64_t>(bytes)}});
      }
      j["top_evicted_prefixes"] = top;
      nlohmann::json removals = nlohmann::json::object();
      for (const char* reason : {"capacity", "quota", "ttl", "freed"}) {
        auto it = r.removals.find(reason);
        removals[reason] = static_cast<uint64_t>(it == r.removals.end() ? 0 : it->second);
      }
      j["removed_pages"] = removals;
      if (r.dataset_bytes >= 0) {
        j["dataset_bytes"] = static_cast<uint64_t>(r.dataset_bytes);
        j["cached_share"] = r.dataset_bytes > 0 ? r.cached_bytes / r.dataset_bytes : 0.0;
      }
      out.push_back(j);
    }
    std::printf(
        "%s\n",
        nlohmann::json{{"mounts", out}, {"unreachable_workers", unreachable}}.dump(2).c_str());
    return kExitOk;
  }
  std::printf("%-20s %10s %7s %8s %8s %10s %10s %9s %9s\n", "MOUNT", "CACHED", "SHARE", "HIT%REQ",
              "HIT%BYTE", "EGRESS", "SAVED", "SRC-REQS", "REQ-SAVED");
  for (const auto& [path, r] : report) {
    std::printf("%-20s %10s %7s %8s %8s %10s %10s %9.0f %9.0f\n", path.c_str(),
                FormatBytes(static_cast<uint64_t>(r.cached_bytes)).c_str(),
                r.dataset_bytes >= 0 ? Percent(r.cached_bytes, r.dataset_bytes).c_str() : "-",
                Percent(r.hits, r.requests).c_str(),
                Percent(r.bytes_from_cache, r.bytes_from_cache + r.bytes_from_ufs).c_str(),
                FormatBytes(static_cast<uint64_t>(r.bytes_from_ufs)).c_str(),
                FormatBytes(static_cast<uint64_t>(r.bytes_from_cache)).c_str(), r.ufs_requests,
                r.hits);
  }
  for (const auto& [path, r] : report) {
    auto top = r.TopEvicted(5);
    if (top.empty()) continue;
    std::printf("\nmost evicted under %s (pages removed:", path.c_str());
    for (const auto& [reason, n] : r.removals) std::printf(" %s %.0f", reason.c_str(), n);
    std::printf("):\n");
    for (const auto& [prefix, bytes] : top) {
      std::printf("  %-40s %10s\n", prefix.c_str(),
                  FormatBytes(static_cast<uint64_t>(bytes)).c_str());
    }
  }
  if (unreachable > 0) std::printf("(%d worker(s) did not answer)\n", unreachable);
  return kExitOk;
}

}  // namespace

void RegisterReportCommand(CLI::App* app, std::vector<std::pair<CLI::App*, Runner>>* out) {
  auto f = std::make_shared<ReportFlags>();
  CLI::App* cmd = app->add_subcommand(
      "report", "Per mount: cached bytes, hit ratio, egress and source requests saved");
  cmd->add_option("PATH", f->path, "Only mounts at, under or above this path");
  AddEtcdFlag(cmd, &f->etcd);
  AddTlsFlags(cmd, &f->tls.ca_file, &f->tls.cert_file, &f->tls.key_file);
  cmd->add_flag("--json", f->json, "JSON output");
  cmd->add_flag("--dataset-size", f->dataset_size,
                "Also list each mount's source to show the cached share of the dataset "
                "(one LIST per 1000 entries)");
  out->push_back({cmd, [f] {
                    if (!f->path.empty()) {
                      auto p = mount::NormalizePath(f->path);
                      if (!p.ok()) return Fail(p.status());
                      f->path = *p;
                    }
                    return RunReport(*f);
                  }});
}

}  // namespace cairn::cli
