// cairn: one binary, one subcommand per role. Only parses arguments and dispatches; each
// command wires its objects in cli/cmd_*.cc.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <exception>

#include "cli/commands.h"
#include "cli/common.h"
#include "common/logging.h"

int main(int argc, char** argv) {
  using namespace cairn::cli;
  // Before any thread starts, so every thread inherits the mask and signals reach sigwait.
  BlockTerminationSignals();
  CLI::App app{"Cairn: a distributed read-through cache for training data"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "cairn 0.1.0");
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
      ->capture_default_str()
      ->envname("CAIRN_LOG_LEVEL");
  std::vector<std::pair<CLI::App*, Runner>> commands;
  commands.push_back({nullptr, RegisterWorker(&app)});
  commands.back().first = app.get_subcommand("worker");
  commands.push_back({nullptr, RegisterFuse(&app)});
  commands.back().first = app.get_subcommand("fuse");
  commands.push_back({nullptr, RegisterUp(&app)});
  commands.back().first = app.get_subcommand("up");
  commands.push_back({nullptr, RegisterDemo(&app)});
  commands.back().first = app.get_subcommand("demo");
  RegisterFsCommands(&app, &commands);
  RegisterClusterCommands(&app, &commands);
  RegisterCacheCommands(&app, &commands);
  RegisterRuleCommands(&app, &commands);
  RegisterReportCommand(&app, &commands);
  RegisterCertCommands(&app, &commands);
  RegisterAuthCommands(&app, &commands);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // "cairn bogus" would read "A subcommand is required": name the unknown command instead.
    if (app.get_subcommands().empty() && !app.remaining().empty()) {
      std::fprintf(stderr, "cairn: error: unknown command '%s' (see cairn --help)\n",
                   app.remaining().front().c_str());
      return kExitUsage;
    }
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }
  cairn::Status s = cairn::InitLogging(log_level);
  if (!s.ok()) return Fail(s);
  if (ScrubSecretArguments(argc, argv)) {
    spdlog::warn(
        "--secret-key or --token on the command line was readable by other users of this "
        "machine (in /proc) until now; prefer the environment (AWS_SECRET_ACCESS_KEY, "
        "CAIRN_TOKEN) or a file only you can read (~/.aws/credentials, --token-file)");
  }
  const uint64_t open_files = RaiseOpenFileLimit();
  if (open_files < 4096) {
    spdlog::debug("open-file limit is {} (ulimit -n): a busy worker may run out", open_files);
  }
  StartSignalDispatch();  // Ctrl-C ends a command unless it installs a SignalHandler.
  try {
    for (auto& [cmd, run] : commands) {
      if (cmd->parsed()) return run();
    }
  } catch (const std::exception& e) {  // A bug: report it plainly, never a raw abort.
    std::fprintf(stderr, "cairn: internal error: %s\n", e.what());
    return kExitError;
  }
  return kExitUsage;
}
