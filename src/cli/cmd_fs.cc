// `cairn ls|stat|cat PATH`: one-shot namespace reads through the client library (through the
// workers when --worker is given, else straight from the source). `cairn put LOCAL PATH` and
// `cairn rm PATH`: writes, always through the worker that owns the path (write-through mounts).
#include <fcntl.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>

#include "cairn/client.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "common/units.h"

namespace cairn::cli {
namespace {

struct FsFlags {
  SourceFlags source;
  std::string path;
  bool json = false;
  bool long_format = false;
  std::string local;           // put: the file to upload ("-": stdin).
  bool no_clobber = false;     // put: fail if PATH exists.
  std::string timeout = "1h";  // sync: how long to wait.
};

StatusOr<std::unique_ptr<Client>> MakeClient(const FsFlags& f) {
  CAIRN_ASSIGN_OR_RETURN(config::Config cfg, BuildConfig(f.source));
  return Client::Create(cfg.client);
}

std::string FormatTime(int64_t ns) {
  time_t t = static_cast<time_t>(ns / 1'000'000'000);
  char buf[32];
  struct tm tm {};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

nlohmann::json ToJson(const FileInfo& info) {
  return {{"name", info.name},
          {"type", info.is_dir ? "dir" : "file"},
          {"size", info.size},
          {"version", info.version},
          {"mtime", FormatTime(info.mtime_ns)}};
}

int RunLs(const FsFlags& f) {
  auto client = MakeClient(f);
  if (!client.ok()) return Fail(client.status());
  auto self = (*client)->Stat(f.path);
  if (!self.ok()) return Fail(self.status());
  nlohmann::json all = nlohmann::json::array();
  auto print = [&](const FileInfo& e) {
    if (f.json) {
      all.push_back(ToJson(e));
    } else if (f.long_format) {
      std::printf("%s %12" PRIu64 " %s %s%s\n", e.is_dir ? "d" : "-", e.size,
                  e.is_dir ? "-                   " : FormatTime(e.mtime_ns).c_str(),
                  e.name.c_str(), e.is_dir ? "/" : "");
    } else {
      std::printf("%s%s\n", e.name.c_str(), e.is_dir ? "/" : "");
    }
  };
  if (!self->is_dir) {
    print(*self);
  } else {
    std::string token;
    do {
      auto page = (*client)->ListDir(f.path, token, 1000);
      if (!page.ok()) return Fail(page.status());
      for (const FileInfo& e : page->entries) print(e);
      token = page->next_token;
    } while (!token.empty());
  }
  if (f.json) std::printf("%s\n", all.dump(2).c_str());
  return kExitOk;
}

int RunStat(const FsFlags& f) {
  auto client = MakeClient(f);
  if (!client.ok()) return Fail(client.status());
  auto info = (*client)->Stat(f.path);
  if (!info.ok()) return Fail(info.status());
  nlohmann::json j = ToJson(*info);
  j["path"] = f.path;
  std::printf("%s\n", j.dump(2).c_str());
  return kExitOk;
}

int RunCat(const FsFlags& f) {
  auto client = MakeClient(f);
  if (!client.ok()) return Fail(client.status());
  auto reader = (*client)->Open(f.path);
  if (!reader.ok()) return Fail(reader.status());
  std::string buf(4 << 20, '\0');
  uint64_t offset = 0;
  while (true) {
    auto n = (*reader)->Read(offset, buf);
    if (!n.ok()) return Fail(n.status());
    if (*n == 0) break;
    size_t written = 0;
    while (written < *n) {
      ssize_t w = write(STDOUT_FILENO, buf.data() + written, *n - written);
      if (w < 0) {
        if (errno == EINTR) continue;
        return Fail(ErrnoToStatus(errno, "write to stdout"));
      }
      written += static_cast<size_t>(w);
    }
    offset += *n;
  }
  return kExitOk;
}

int RunPut(const FsFlags& f) {
  const bool from_stdin = f.local == "-";
  const int fd = from_stdin ? STDIN_FILENO : ::open(f.local.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Fail(ErrnoToStatus(errno, "open " + f.local));
  struct FdCloser {
    int fd;
    bool own;
    ~FdCloser() {
      if (own) ::close(fd);
    }
  } closer{fd, !from_stdin};
  auto client = MakeClient(f);
  if (!client.ok()) return Fail(client.status());
  WriteOptions options;
  options.exclusive = f.no_clobber;
  auto writer = (*client)->OpenForWrite(f.path, options);
  if (!writer.ok()) return Fail(writer.status());
  std::string buf(4 << 20, '\0');
  uint64_t offset = 0;
  while (true) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Fail(ErrnoToStatus(errno, "read " + f.local));
    if (n == 0) break;
    Status written =
        (*writer)->Write(offset, std::span<const char>(buf.data(), static_cast<size_t>(n)));
    if (!written.ok()) return Fail(written);
    offset += static_cast<uint64_t>(n);
  }
  auto info = (*writer)->Close();
  if (!info.ok()) return Fail(info.status());
  nlohmann::json j = ToJson(*info);
  j["path"] = f.path;
  std::printf("%s\n", j.dump(2).c_str());
  return kExitOk;
}

int RunRm(const FsFlags& f) {
  auto client = MakeClient(f);
  if (!client.ok()) return Fail(client.status());
  Status removed = (*client)->Remove(f.path);
  if (!removed.ok()) return Fail(removed);
  return kExitOk;
}

// Exit 0 once every file closed under PATH on a write-back mount is in its source; 1 (with what
// still waits) when the timeout passes first.
int RunSync(const FsFlags& f) {
  auto timeout = ParseDuration(f.timeout);
  if (!timeout.ok()) return Fail(timeout.status().WithContext("--timeout"));
  auto client = MakeClient(f);
  if (!client.ok()) return Fail(client.status());
  Status synced =
      (*client)->SyncWrites(f.path.empty() ? "/" : f.path,
                            std::chrono::duration_cast<std::chrono::milliseconds>(*timeout));
  if (!synced.ok()) return Fail(synced);
  return kExitOk;
}

}  // namespace

void RegisterFsCommands(CLI::App* app, std::vector<std::pair<CLI::App*, Runner>>* out) {
  struct Spec {
    const char* name;
    const char* help;
    int (*run)(const FsFlags&);
  };
  const Spec specs[] = {
      {"ls", "List a folder of the namespace", RunLs},
      {"stat", "Show metadata of a path as JSON", RunStat},
      {"cat", "Write a file's bytes to stdout", RunCat},
      {"rm", "Remove a file (of a write-through mount, through its worker)", RunRm},
      {"put", "Write a local file (or stdin: -) to PATH through its worker", RunPut},
      {"sync",
       "Wait until the files closed under PATH (default /) on write-back mounts are in "
       "their sources",
       RunSync},
  };
  for (const Spec& spec : specs) {
    auto f = std::make_shared<FsFlags>();
    CLI::App* cmd = app->add_subcommand(spec.name, spec.help);
    if (std::string(spec.name) == "put") {
      cmd->add_option("LOCAL", f->local, "Local file to upload, or - for stdin")->required();
      cmd->add_flag("--no-clobber", f->no_clobber, "Fail if PATH exists (exclusive create)");
    }
    if (std::string(spec.name) == "sync") {
      cmd->add_option("PATH", f->path, "Namespace path (a file or a folder; default /)");
      cmd->add_option("--timeout", f->timeout, "How long to wait (default 1h), e.g. 90s, 10m");
    } else {
      cmd->add_option("PATH", f->path, "Namespace path, e.g. /lake/train/0001.tar")->required();
    }
    AddSourceFlags(cmd, &f->source, /*with_workers=*/true);
    AddEtcdFlag(cmd, &f->source.etcd);
    if (std::string(spec.name) == "ls") {
      cmd->add_flag("--json", f->json, "Print JSON");
      cmd->add_flag("-l,--long", f->long_format, "Show type, size and modification time");
    }
    auto run = spec.run;
    out->push_back({cmd, [f, run] { return run(*f); }});
  }
}

}  // namespace cairn::cli
