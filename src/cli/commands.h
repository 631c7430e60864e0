// The `cairn` subcommands. Each Register* adds its subcommand to the app and returns a function
// that runs it after parsing (returning the process exit code).
#ifndef CAIRN_CLI_COMMANDS_H_
#define CAIRN_CLI_COMMANDS_H_

#include <CLI/CLI.hpp>

#include <functional>

namespace cairn::cli {

using Runner = std::function<int()>;

Runner RegisterWorker(CLI::App* app);
Runner RegisterFuse(CLI::App* app);
Runner RegisterUp(CLI::App* app);
Runner RegisterDemo(CLI::App* app);
// ls, stat, cat: one-shot reads through the client library.
void RegisterFsCommands(CLI::App* app, std::vector<std::pair<CLI::App*, Runner>>* out);
// load, free, invalidate: cache management through the client library.
void RegisterCacheCommands(CLI::App* app, std::vector<std::pair<CLI::App*, Runner>>* out);
// pin, unpin, ttl, priority, admission, quota, rules: cache-management rules in etcd.
void RegisterRuleCommands(CLI::App* app, std::vector<std::pair<CLI::App*, Runner>>* out);
// report: per-mount cache effectiveness across the cluster.
void RegisterReportCommand(CLI::App* app, std::vector<std::pair<CLI::App*, Runner>>* out);
// mount add|ls|rm (the mount table in etcd) and status.
void RegisterClusterCommands(CLI::App* app, std::vector<std::pair<CLI::App*, Runner>>* out);
// cert ca|issue|show: a private CA and the certificates of a TLS cluster.
void RegisterCertCommands(CLI::App* app, std::vector<std::pair<CLI::App*, Runner>>* out);
// token keygen|issue|show and acl set|rm|ls|enable|disable: authorization.
void RegisterAuthCommands(CLI::App* app, std::vector<std::pair<CLI::App*, Runner>>* out);

}  // namespace cairn::cli

#endif  // CAIRN_CLI_COMMANDS_H_
