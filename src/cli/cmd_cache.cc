// Cache management commands over the client library: `cairn load` (preload with a progress
// bar), `cairn free` and `cairn invalidate`.
#include <unistd.h>

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "cairn/client.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "common/units.h"

namespace cairn::cli {
namespace {

struct CacheFlags {
  SourceFlags source;
  std::string path;
  bool json = false;
  std::string bandwidth;
  int replicas = 0;
  int parallelism = 32;
  bool verify = false;
  bool skip_cached = false;
};

StatusOr<std::unique_ptr<Client>> MakeClient(const CacheFlags& f) {
  CAIRN_ASSIGN_OR_RETURN(config::Config cfg, BuildConfig(f.source));
  return Client::Create(cfg.client);
}

std::string FormatEta(double seconds) {
  if (seconds < 0 || seconds > 99 * 3600) return "--:--";
  int s = static_cast<int>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof(buf), "%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60);
  } else {
    std::snprintf(buf, sizeof(buf), "%d:%02d", s / 60, s % 60);
  }
  return buf;
}

// One progress line: files, bytes, rate, ETA (ETA once the listing is complete).
std::string ProgressLine(const LoadProgress& p, bool verify) {
  double rate = p.elapsed_seconds > 0 ? p.bytes_done / p.elapsed_seconds : 0;
  double eta = p.listing_done && rate > 0 ? (p.bytes_total - p.bytes_done) / rate : -1;
  double fraction = p.bytes_total > 0 ? double(p.bytes_done) / p.bytes_total : 0;
  char line[256];
  std::snprintf(line, sizeof(line),
                "%5.1f%%%s %" PRIu64 "/%" PRIu64 "%s files  %s/%s  %s/s  ETA %s  %s %" PRIu64,
                100 * fraction, p.listing_done ? "" : "+", p.files_done, p.files_total,
                p.listing_done ? "" : "+", FormatBytes(p.bytes_done).c_str(),
                FormatBytes(p.bytes_total).c_str(),
                FormatBytes(static_cast<uint64_t>(rate)).c_str(), FormatEta(eta).c_str(),
                verify ? "missing" : "from source", verify ? p.pages_missing : p.pages_loaded);
  return line;
}

std::string Bar(double fraction, int width) {
  int full = static_cast<int>(fraction * width);
  std::string bar(width, ' ');
  for (int i = 0; i < full && i < width; ++i) bar[i] = '=';
  if (full < width) bar[full] = '>';
  return "[" + bar + "]";
}

nlohmann::json ToJson(const LoadProgress& p) {
  return {{"files_total", p.files_total},
          {"files_done", p.files_done},
          {"bytes_total", p.bytes_total},
          {"bytes_done", p.bytes_done},
          {"pages_total", p.pages_total},
          {"pages_done", p.pages_done},
          {"pages_cached_before", p.pages_cached_before},
          {"pages_loaded", p.pages_loaded},
          {"pages_failed", p.pages_failed},
          {"first_error", p.first_error},
          {"pages_missing", p.pages_missing},
          {"bytes_from_source", p.bytes_from_source},
          {"listing_done", p.listing_done},
          {"cancelled", p.cancelled},
          {"elapsed_seconds", p.elapsed_seconds},
          {"missing_files", p.missing_files}};
}

int RunLoad(const CacheFlags& f) {
  LoadOptions options;
  if (!f.bandwidth.empty()) {
    auto bw = ParseBytes(f.bandwidth);
    if (!bw.ok())
      return Fail(bw.status().WithContext("--bandwidth (bytes per second, e.g. 200MiB)"));
    if (*bw == 0) return Fail(InvalidArgumentError("--bandwidth must be greater than 0"));
    options.max_bytes_per_second = *bw;
  }
  options.replicas = f.replicas;
  options.parallelism = f.parallelism;
  options.verify_only = f.verify;
  options.skip_cached = f.skip_cached;
  std::atomic<bool> cancel{false};
  options.cancel = &cancel;
  auto client = MakeClient(f);
  if (!client.ok()) return Fail(client.status());

  const bool tty = !f.json && isatty(STDERR_FILENO);
  double last_plain = -10;
  auto progress = [&](const LoadProgress& p) {
    if (f.json) return;
    if (tty) {
      double fraction = p.bytes_total > 0 ? double(p.bytes_done) / p.bytes_total : 0;
      std::fprintf(stderr, "\r\033[K%s %s", Bar(fraction, 24).c_str(),
                   ProgressLine(p, f.verify).c_str());
      std::fflush(stderr);
    } else if (p.elapsed_seconds - last_plain >= 5) {  // Logs and pipes: a line every 5 s.
      last_plain = p.elapsed_seconds;
      std::fprintf(stderr, "%s\n", ProgressLine(p, f.verify).c_str());
    }
  };
  StatusOr<LoadProgress> result = UnavailableError("not run");
  {
    SignalHandler signals([&cancel](int) { cancel = true; });
    result = (*client)->Load(f.path, options, progress);
  }
  if (tty) std::fprintf(stderr, "\n");
  if (!result.ok()) return Fail(result.status());
  const LoadProgress& p = *result;
  if (f.json) {
    std::printf("%s\n",
                ToJson(p).dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else if (f.verify) {
    std::printf("%" PRIu64 " files, %" PRIu64 " pages, %" PRIu64 " not cached%s\n", p.files_total,
                p.pages_total, p.pages_missing,
                p.pages_failed ? " (some workers did not answer)" : "");
    for (const std::string& file : p.missing_files) std::printf("not cached: %s\n", file.c_str());
  } else {
    std::printf("%s %" PRIu64 " files, %s in %.1f s: %" PRIu64
                " pages loaded (%s from the source), "
                "%" PRIu64 " already cached, %" PRIu64 " failed\n",
                p.cancelled ? "interrupted after" : "loaded", p.files_done,
                FormatBytes(p.bytes_done).c_str(), p.elapsed_seconds, p.pages_loaded,
                FormatBytes(p.bytes_from_source).c_str(), p.pages_cached_before, p.pages_failed);
  }
  if (p.cancelled) {
    std::fprintf(stderr, "cairn: interrupted; run the same command again to resume\n");
    return 130;
  }
  if (p.pages_failed > 0) {
    std::fprintf(stderr, "cairn: error: %" PRIu64 " pages could not be %s (the first: %s)\n",
                 p.pages_failed, f.verify ? "checked" : "loaded", p.first_error.c_str());
    return kExitError;
  }
  if (f.verify && p.pages_missing > 0) return kExitError;
  return kExitOk;
}

int RunFree(const CacheFlags& f) {
  auto client = MakeClient(f);
  if (!client.ok()) return Fail(client.status());
  auto result = (*client)->Free(f.path);
  if (!result.ok()) return Fail(result.status());
  if (f.json) {
    nlohmann::json j = {{"files", result->files},
                        {"pages_dropped", result->pages_dropped},
                        {"failures", result->failures}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("freed %" PRIu64 " cached pages of %" PRIu64 " files\n", result->pages_dropped,
                result->files);
  }
  if (result->failures > 0) {
    return Fail(UnavailableError(std::to_string(result->failures) +
                                 " worker requests failed; their copies may remain"));
  }
  return kExitOk;
}

int RunInvalidate(const CacheFlags& f) {
  // Without etcd there is no way to reach the running clients (their caches are in their own
  // processes): saying "invalidated" would be a lie.
  if (f.source.etcd.empty()) {
    return Fail(InvalidArgumentError(
        "cairn invalidate needs --etcd (cluster mode): it tells every running client through "
        "etcd. Without etcd, lower the mount's --metadata-ttl, or restart the mount"));
  }
  auto client = MakeClient(f);
  if (!client.ok()) return Fail(client.status());
  Status s = (*client)->Invalidate(f.path);
  if (!s.ok()) return Fail(s);
  std::printf("invalidated %s\n", f.path.c_str());
  return kExitOk;
}

CLI::App* AddCommand(CLI::App* app, const char* name, const char* help,
                     std::shared_ptr<CacheFlags> f) {
  CLI::App* cmd = app->add_subcommand(name, help);
  cmd->add_option("PATH", f->path, "Namespace path (a file or a folder)")->required();
  AddSourceFlags(cmd, &f->source, /*with_workers=*/true);
  AddEtcdFlag(cmd, &f->source.etcd);
  return cmd;
}

}  // namespace

void RegisterCacheCommands(CLI::App* app, std::vector<std::pair<CLI::App*, Runner>>* out) {
  auto load = std::make_shared<CacheFlags>();
  CLI::App* cmd = AddCommand(app, "load",
                             "Preload a file or a folder into the cache (all replicas), with "
                             "progress; re-run to resume",
                             load);
  cmd->add_option("--bandwidth", load->bandwidth,
                  "Cap on bytes per second read from the source, e.g. 200MiB");
  cmd->add_option("--replicas", load->replicas,
                  "Copies to load per page (default: the mount's replica count)")
      ->check(CLI::Range(1, 8));
  cmd->add_option("--parallelism", load->parallelism, "Page requests in flight (default 32)")
      ->check(CLI::Range(1, 4096));
  cmd->add_flag("--verify", load->verify,
                "Load nothing; report what is not cached (exit 1 if any)");
  cmd->add_flag("--skip-cached", load->skip_cached,
                "Leave cached pages untouched (by default they count as just used)");
  cmd->add_flag("--json", load->json, "Print the result as JSON (no progress bar)");
  out->push_back({cmd, [load] { return RunLoad(*load); }});

  auto free_flags = std::make_shared<CacheFlags>();
  cmd = AddCommand(app, "free", "Drop the cached pages of a file or folder from every worker",
                   free_flags);
  cmd->add_flag("--json", free_flags->json, "Print the result as JSON");
  out->push_back({cmd, [free_flags] { return RunFree(*free_flags); }});

  auto inval = std::make_shared<CacheFlags>();
  cmd = AddCommand(app, "invalidate",
                   "Make every client see the source's current version of a path now "
                   "(instead of after the metadata TTL)",
                   inval);
  out->push_back({cmd, [inval] { return RunInvalidate(*inval); }});
}

}  // namespace cairn::cli
