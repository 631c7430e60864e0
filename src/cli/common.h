// Shared pieces of the `cairn` subcommands: flags every client/worker command takes, turning
// them (and an optional config file) into options, and the exit-code convention.
//
// Exit codes: 0 success, 1 runtime error (message on stderr, no stack trace), 2 bad usage.
#ifndef CAIRN_CLI_COMMON_H_
#define CAIRN_CLI_COMMON_H_

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli/signals.h"
#include "config/config.h"
#include "membership/etcd_coordination.h"

namespace cairn::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;

// Flags that describe where data comes from and which workers serve it.
// --etcd and the TLS files for etcd.
struct EtcdFlags {
  std::string endpoints;  // --etcd or $CAIRN_ETCD.
  std::string ca, cert, key;
  std::string insecure_plaintext;  // --etcd-insecure-plaintext REASON.
  bool empty() const { return endpoints.empty(); }
  TlsSettings tls() const { return {ca, cert, key}; }
};

struct SourceFlags {
  std::string config_path;
  std::vector<std::string> mounts;   // PATH=URI
  std::vector<std::string> workers;  // host:port
  std::string page_size;
  std::string metadata_ttl;
  std::string worker_timeout;
  std::string write_room_wait;
  // S3 options applied to every mount given by flag (a config file sets them per mount).
  std::string endpoint, region, access_key, secret_key, profile;
  bool virtual_hosted = false;
  bool no_short_circuit = false;
  bool no_cache = false;
  bool metadata_via_workers = false;
  std::string write_mode;                 // Of the mounts given by flag.
  EtcdFlags etcd;                         // Cluster mode.
  std::string tls_ca, tls_cert, tls_key;  // TLS to the workers (and, for a worker, its own).
  std::string token, token_file;          // A job token for the workers (client commands).
};

void AddSourceFlags(CLI::App* app, SourceFlags* flags, bool with_workers);

// Overwrites the values of --secret-key and --token in argv with '*' (after parsing), so that
// /proc/PID/cmdline stops showing it to other users of the machine. True if one was found (the
// caller warns: it was visible until now).
bool ScrubSecretArguments(int argc, char** argv);

// Adds --tls-ca, --tls-cert, --tls-key (defaults $CAIRN_TLS_CA, ...).
void AddTlsFlags(CLI::App* app, std::string* ca, std::string* cert, std::string* key);

// Adds --etcd (default $CAIRN_ETCD) and --etcd-ca/--etcd-cert/--etcd-key to a command.
void AddEtcdFlag(CLI::App* app, EtcdFlags* etcd);
// "host:port" or URLs, comma-separated -> "http://host:port,..." (InvalidArgument if malformed).
StatusOr<std::string> NormalizeEtcdEndpoints(const std::string& flag);

// An etcd client for the cluster commands (mount, rules, status, report) from their --etcd flag.
// InvalidArgument when no etcd is given or an endpoint is malformed; does not contact etcd.
StatusOr<std::unique_ptr<membership::EtcdCoordination>> ConnectEtcd(const EtcdFlags& flags);

// Builds the configuration: the config file (if any), then flags on top.
StatusOr<config::Config> BuildConfig(const SourceFlags& flags);

// Applies the S3 flags and TTL to one mount spec.
Status ApplyMountFlags(const SourceFlags& flags, MountSpec* spec);

// Prints "cairn: error: ..." and returns kExitError.
int Fail(const Status& status);

// Default cache folder: /var/cache/cairn for root, else $XDG_CACHE_HOME/cairn or ~/.cache/cairn.
std::string DefaultCacheDir();
// Default capacity for a cache folder: half the free space of its file system, at most 100 GiB,
// at least 64 MiB (InvalidArgument if even that is not free).
StatusOr<uint64_t> DefaultCacheCapacity(const std::string& dir);

// The most one source request of a worker may read for a sequential reader
// (`--source-read-size`, e.g. "8MiB"; 0: one page per request). InvalidArgument above 64 MiB
// (each miss thread holds that much while its request runs).
StatusOr<uint32_t> ParseSourceReadSize(const std::string& text);
// Adds `--source-read-size` to a command that runs a worker.
void AddSourceReadSizeFlag(CLI::App* cmd, std::string* value);

// Raises this process's soft limit on open files to its hard limit (as Go's runtime does). A
// worker keeps up to 1024 page files open per cache folder for hits and a socket per client
// connection (up to 1024): Debian's default soft limit of 1024 would fail accept() or open()
// with EMFILE under load. Returns the soft limit now in force.
uint64_t RaiseOpenFileLimit();

}  // namespace cairn::cli

#endif  // CAIRN_CLI_COMMON_H_
