// Cache-management rules in etcd: `cairn pin|unpin PATH`, `cairn ttl set|rm`, `cairn priority
// set|rm`, `cairn admission set|rm`, `cairn quota set|rm`, `cairn rules ls`. Workers apply a
// change to new and already-cached pages within about a second (docs/policies.md).
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "common/units.h"
#include "membership/etcd_coordination.h"
#include "membership/mount_store.h"
#include "membership/rule_store.h"
#include "mount/mount_table.h"

namespace cairn::cli {
namespace {

struct RuleFlags {
  EtcdFlags etcd;
  std::string path;
  std::string value;
  bool json = false;
};

using Edit = std::function<Status(policy::PathRule*)>;

// Builds the edit from the flags (parsing the value first, so bad input never reaches etcd).
using EditMaker = std::function<StatusOr<Edit>(const RuleFlags&)>;

int RunEdit(const RuleFlags& f, const EditMaker& make, const char* done, bool mount_only) {
  auto edit = make(f);
  if (!edit.ok()) return Fail(edit.status());
  auto etcd = ConnectEtcd(f.etcd);
  if (!etcd.ok()) return Fail(etcd.status());
  if (mount_only) {
    auto mounts = membership::MountStore(etcd->get()).List();
    if (!mounts.ok()) return Fail(mounts.status());
    bool found = false;
    for (const MountSpec& m : *mounts) found |= m.path == f.path;
    if (!found) return Fail(NotFoundError(f.path + " is not a mount path (see cairn mount ls)"));
  }
  Status s = membership::RuleStore(etcd->get()).Edit(f.path, *edit);
  if (!s.ok()) return Fail(s);
  std::printf("%s %s\n", done, f.path.c_str());
  return kExitOk;
}

std::string Describe(const policy::PathRule& r) {
  std::string out;
  auto add = [&](const std::string& s) { out += (out.empty() ? "" : " ") + s; };
  if (r.pin) add(*r.pin ? "pinned" : "unpinned");
  if (r.priority) add("priority=" + std::string(policy::PriorityName(*r.priority)));
  if (r.ttl_ms) {
    add("ttl=" + (*r.ttl_ms % 1000 == 0 ? std::to_string(*r.ttl_ms / 1000) + "s"
                                        : std::to_string(*r.ttl_ms) + "ms"));
  }
  if (r.admission) add("admission=" + std::string(policy::AdmissionName(*r.admission)));
  if (r.quota_bytes) add("quota=" + FormatBytes(*r.quota_bytes));
  return out;
}

int RunList(const RuleFlags& f) {
  auto etcd = ConnectEtcd(f.etcd);
  if (!etcd.ok()) return Fail(etcd.status());
  auto rules = membership::RuleStore(etcd->get()).List();
  if (!rules.ok()) return Fail(rules.status());
  std::sort(rules->begin(), rules->end(),
            [](const policy::PathRule& a, const policy::PathRule& b) { return a.path < b.path; });
  if (f.json) {
    std::printf("%s\n",
                nlohmann::json::parse(membership::EncodeRules(*rules))["rules"].dump(2).c_str());
    return kExitOk;
  }
  std::printf("%-40s %s\n", "PATH", "RULES");
  for (const policy::PathRule& r : *rules) {
    std::printf("%-40s %s\n", r.path.c_str(), Describe(r).c_str());
  }
  return kExitOk;
}

CLI::App* AddRuleCommand(CLI::App* parent, const char* name, const char* help,
                         std::shared_ptr<RuleFlags> f, const char* value_name,
                         const char* value_help) {
  CLI::App* cmd = parent->add_subcommand(name, help);
  cmd->add_option("PATH", f->path, "Namespace path, e.g. /lake/val")->required();
  if (value_name != nullptr) cmd->add_option(value_name, f->value, value_help)->required();
  AddEtcdFlag(cmd, &f->etcd);
  return cmd;
}

}  // namespace

void RegisterRuleCommands(CLI::App* app, std::vector<std::pair<CLI::App*, Runner>>* out) {
  auto add = [&](CLI::App* parent, const char* name, const char* help, const char* value_name,
                 const char* value_help, EditMaker make, const char* done, bool mount_only) {
    auto f = std::make_shared<RuleFlags>();
    CLI::App* cmd = AddRuleCommand(parent, name, help, f, value_name, value_help);
    out->push_back({cmd, [f, make, done, mount_only] {
                      auto path = mount::NormalizePath(f->path);
                      if (!path.ok()) return Fail(path.status());
                      f->path = *path;
                      return RunEdit(*f, make, done, mount_only);
                    }});
  };
  auto constant = [](Edit e) { return [e](const RuleFlags&) -> StatusOr<Edit> { return e; }; };

  add(app, "pin", "Never evict the cached pages under PATH", nullptr, nullptr,
      constant([](policy::PathRule* r) {
        r->pin = true;
        return Status::Ok();
      }),
      "pinned", false);
  add(app, "unpin", "Remove a pin (pages under PATH become evictable)", nullptr, nullptr,
      constant([](policy::PathRule* r) {
        r->pin.reset();
        return Status::Ok();
      }),
      "unpinned", false);

  CLI::App* ttl = app->add_subcommand("ttl", "Expire cached pages under a path after a time");
  ttl->require_subcommand(1);
  add(
      ttl, "set", "Pages under PATH expire DURATION after they are cached", "DURATION",
      "e.g. 30m, 12h",
      [](const RuleFlags& f) -> StatusOr<Edit> {
        CAIRN_ASSIGN_OR_RETURN(auto d, ParseDuration(f.value));
        int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
        if (ms <= 0)
          return InvalidArgumentError("TTL must be at least 1ms (use `ttl rm` to clear)");
        if (ms > policy::kMaxRuleTtlMs) {
          return InvalidArgumentError("TTL must be at most 100 years");
        }
        return Edit([ms](policy::PathRule* r) {
          r->ttl_ms = ms;
          return Status::Ok();
        });
      },
      "ttl set on", false);
  add(ttl, "rm", "Remove the TTL of PATH", nullptr, nullptr, constant([](policy::PathRule* r) {
        r->ttl_ms.reset();
        return Status::Ok();
      }),
      "ttl removed from", false);

  CLI::App* prio = app->add_subcommand("priority", "Eviction priority class of a path");
  prio->require_subcommand(1);
  add(
      prio, "set", "low pages are evicted first, high last", "CLASS", "low, normal or high",
      [](const RuleFlags& f) -> StatusOr<Edit> {
        CAIRN_ASSIGN_OR_RETURN(policy::Priority p, policy::ParsePriority(f.value));
        return Edit([p](policy::PathRule* r) {
          r->priority = p;
          return Status::Ok();
        });
      },
      "priority set on", false);
  add(prio, "rm", "Remove the priority of PATH", nullptr, nullptr,
      constant([](policy::PathRule* r) {
        r->priority.reset();
        return Status::Ok();
      }),
      "priority removed from", false);

  CLI::App* adm = app->add_subcommand("admission", "How reads under a path enter the cache");
  adm->require_subcommand(1);
  add(
      adm, "set", "normal, low (cached at low priority) or bypass (served, not cached)", "MODE",
      "normal, low or bypass",
      [](const RuleFlags& f) -> StatusOr<Edit> {
        CAIRN_ASSIGN_OR_RETURN(policy::Admission a, policy::ParseAdmission(f.value));
        return Edit([a](policy::PathRule* r) {
          r->admission = a;
          return Status::Ok();
        });
      },
      "admission set on", false);
  add(adm, "rm", "Remove the admission rule of PATH", nullptr, nullptr,
      constant([](policy::PathRule* r) {
        r->admission.reset();
        return Status::Ok();
      }),
      "admission rule removed from", false);

  CLI::App* quota = app->add_subcommand("quota", "Byte cap of a mount across the cluster");
  quota->require_subcommand(1);
  add(
      quota, "set", "Cap the cached bytes of the mount at PATH (best effort, per worker share)",
      "SIZE", "e.g. 2TiB",
      [](const RuleFlags& f) -> StatusOr<Edit> {
        CAIRN_ASSIGN_OR_RETURN(uint64_t bytes, ParseBytes(f.value));
        if (bytes == 0) return InvalidArgumentError("quota must be > 0 (use `quota rm` to clear)");
        if (bytes > policy::kMaxRuleQuotaBytes) {
          return InvalidArgumentError("quota must be at most 4 EiB");
        }
        return Edit([bytes](policy::PathRule* r) {
          r->quota_bytes = bytes;
          return Status::Ok();
        });
      },
      "quota set on", true);
  add(quota, "rm", "Remove the quota of the mount at PATH", nullptr, nullptr,
      constant([](policy::PathRule* r) {
        r->quota_bytes.reset();
        return Status::Ok();
      }),
      "quota removed from", false);

  CLI::App* rules = app->add_subcommand("rules", "Show the cache-management rules");
  rules->require_subcommand(1);
  auto ls = std::make_shared<RuleFlags>();
  CLI::App* cmd = rules->add_subcommand("ls", "List the rules by path");
  AddEtcdFlag(cmd, &ls->etcd);
  cmd->add_flag("--json", ls->json, "JSON output");
  out->push_back({cmd, [ls] { return RunList(*ls); }});
}

}  // namespace cairn::cli
