// cairn token keygen|issue|show and cairn acl set|rm|ls|enable|disable: job tokens and the
// cluster's authorization policy (docs/security.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "auth/policy.h"
#include "auth/token.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "common/file_util.h"
#include "common/units.h"
#include "membership/acl_store.h"
#include "mount/mount_table.h"

namespace cairn::cli {
namespace {

struct TokenFlags {
  std::string out_dir = ".";
  std::string key_file;
  std::string principal;
  std::string ttl = "12h";
  std::string token;
  bool force = false;
};

int RunKeygen(const TokenFlags& f) {
  auto pair = auth::GenerateTokenKey();
  if (!pair.ok()) return Fail(pair.status());
  const std::string priv = f.out_dir + "/token.key", pub = f.out_dir + "/token.pub";
  if (!f.force) {
    for (const std::string& p : {priv, pub}) {
      if (access(p.c_str(), F_OK) == 0) {
        return Fail(AlreadyExistsError(p + " exists (give --force to replace it)"));
      }
    }
  }
  if (Status s = WriteNewFile(priv, pair->private_key, 0600, f.force); !s.ok()) return Fail(s);
  if (Status s = WriteNewFile(pub, pair->public_key, 0644, f.force); !s.ok()) return Fail(s);
  std::printf(
      "wrote %s (signs tokens: keep it with whoever issues them) and %s (give it to "
      "every worker: --token-public-key)\n",
      priv.c_str(), pub.c_str());
  return kExitOk;
}

int RunTokenIssue(const TokenFlags& f) {
  auto ttl = ParseDuration(f.ttl);
  if (!ttl.ok()) return Fail(ttl.status().WithContext("--ttl"));
  const int64_t seconds = std::chrono::duration_cast<std::chrono::seconds>(*ttl).count();
  if (seconds < 1 || seconds > auth::kMaxTokenTtlSeconds) {
    return Fail(InvalidArgumentError("--ttl must be between 1s and 366 days"));
  }
  auto pem = ReadSmallFile(f.key_file, 64 << 10);
  if (!pem.ok()) return Fail(pem.status().WithContext("--key"));
  auto signer = auth::TokenSigner::FromPrivateKeyPem(*pem);
  if (!signer.ok()) return Fail(signer.status().WithContext(f.key_file));
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  auto token = signer->Sign({f.principal, now, now + seconds, ""});
  if (!token.ok()) return Fail(token.status());
  std::printf("%s\n", token->c_str());
  return kExitOk;
}

int RunTokenShow(const TokenFlags& f) {
  auto claims = auth::DecodeTokenUnverified(f.token);
  if (!claims.ok()) return Fail(claims.status());
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  std::printf("principal: %s\nkey id: %s\n", claims->principal.c_str(), claims->key_id.c_str());
  if (claims->expires_at <= now) {
    std::printf("expired %lld s ago\n", static_cast<long long>(now - claims->expires_at));
    return kExitError;
  }
  std::printf("expires in %lld s (signature not checked here: workers check it)\n",
              static_cast<long long>(claims->expires_at - now));
  return kExitOk;
}

struct AclFlags {
  EtcdFlags etcd;
  std::string principal;
  std::string prefix;
  std::string access;
  bool json = false;
};

int RunAclEdit(const AclFlags& f, const std::function<Status(auth::Policy*)>& edit,
               const std::string& done) {
  auto etcd = ConnectEtcd(f.etcd);
  if (!etcd.ok()) return Fail(etcd.status());
  Status s = membership::AclStore(etcd->get()).Edit(edit);
  if (!s.ok()) return Fail(s);
  std::printf("%s\n", done.c_str());
  return kExitOk;
}

int RunAclSet(const AclFlags& f) {
  auto access = auth::ParseAccessSet(f.access);
  if (!access.ok()) return Fail(access.status());
  auto prefix = mount::NormalizePath(f.prefix);
  if (!prefix.ok()) return Fail(prefix.status());
  if (Status s = auth::ValidatePrincipal(f.principal); !s.ok()) return Fail(s);
  return RunAclEdit(
      f,
      [&](auth::Policy* p) {
        auto it = std::find_if(p->grants.begin(), p->grants.end(), [&](const auth::Grant& g) {
          return g.principal == f.principal && g.prefix == *prefix;
        });
        if (it == p->grants.end()) {
          p->grants.push_back({f.principal, *prefix, *access});
        } else {
          it->access = *access;
        }
        return Status::Ok();
      },
      "granted " + auth::AccessSetName(*access) + " on " + *prefix + " to " + f.principal);
}

int RunAclRm(const AclFlags& f) {
  auto prefix = mount::NormalizePath(f.prefix);
  if (!prefix.ok()) return Fail(prefix.status());
  return RunAclEdit(
      f,
      [&](auth::Policy* p) {
        auto it = std::find_if(p->grants.begin(), p->grants.end(), [&](const auth::Grant& g) {
          return g.principal == f.principal && g.prefix == *prefix;
        });
        if (it == p->grants.end()) {
          return NotFoundError("no grant for " + f.principal + " on " + *prefix +
                               " (see cairn acl ls)");
        }
        p->grants.erase(it);
        return Status::Ok();
      },
      "removed the grant of " + f.principal + " on " + *prefix);
}

int RunAclEnable(const AclFlags& f, bool enabled) {
  return RunAclEdit(
      f,
      [enabled](auth::Policy* p) {
        p->enabled = enabled;
        return Status::Ok();
      },
      enabled ? "authorization enabled: workers deny whatever no grant allows"
              : "authorization disabled: workers allow every request");
}

int RunAclLs(const AclFlags& f) {
  auto etcd = ConnectEtcd(f.etcd);
  if (!etcd.ok()) return Fail(etcd.status());
  auto policy = membership::AclStore(etcd->get()).Get();
  if (!policy.ok()) return Fail(policy.status());
  if (f.json) {
    std::printf("%s\n", nlohmann::json::parse(membership::EncodeAcl(*policy)).dump(2).c_str());
    return kExitOk;
  }
  std::printf("authorization: %s\n",
              policy->enabled ? "enabled (deny unless granted)" : "disabled (allow all)");
  std::printf("%-32s %-40s %s\n", "PRINCIPAL", "PREFIX", "ACCESS");
  for (const auth::Grant& g : policy->grants) {
    std::printf("%-32s %-40s %s\n", g.principal.c_str(), g.prefix.c_str(),
                auth::AccessSetName(g.access).c_str());
  }
  return kExitOk;
}

// What the policy in etcd gives PRINCIPAL on PATH (as a worker would decide it).
int RunAclCheck(const AclFlags& f) {
  auto path = mount::NormalizePath(f.prefix);
  if (!path.ok()) return Fail(path.status());
  if (Status s = auth::ValidatePrincipal(f.principal); !s.ok()) return Fail(s);
  if (f.principal == auth::kAnyPrincipal) {
    return Fail(InvalidArgumentError("check a principal by name, not '*'"));
  }
  auto etcd = ConnectEtcd(f.etcd);
  if (!etcd.ok()) return Fail(etcd.status());
  auto policy = membership::AclStore(etcd->get()).Get();
  if (!policy.ok()) return Fail(policy.status());
  auth::Identity who{auth::Identity::Source::kCertificate, f.principal, false};
  std::printf("%s on %s: %s%s\n", f.principal.c_str(), path->c_str(),
              auth::AccessSetName(auth::PolicyIndex(*policy).AccessOn(who, *path)).c_str(),
              policy->enabled ? "" : " (authorization disabled: everything is allowed)");
  return kExitOk;
}

void AddAclTarget(CLI::App* cmd, AclFlags* f) {
  cmd->add_option("PRINCIPAL", f->principal,
                  "A certificate's common name or a token's principal; * = any authenticated one")
      ->required();
  cmd->add_option("PREFIX", f->prefix,
                  "Namespace path the grant covers, with everything below it (/data covers "
                  "/data/x, never /data2)")
      ->required();
  AddEtcdFlag(cmd, &f->etcd);
}

}  // namespace

void RegisterAuthCommands(CLI::App* app, std::vector<std::pair<CLI::App*, Runner>>* out) {
  CLI::App* token = app->add_subcommand("token", "Job tokens: a principal with an expiry, signed");
  token->require_subcommand(1);
  auto kg = std::make_shared<TokenFlags>();
  CLI::App* keygen = token->add_subcommand(
      "keygen", "Create the token signing key: writes token.key (0600) and token.pub");
  keygen->add_option("--out", kg->out_dir, "Folder to write to (default .)");
  keygen->add_flag("--force", kg->force, "Replace existing files");
  out->push_back({keygen, [kg] { return RunKeygen(*kg); }});

  auto is = std::make_shared<TokenFlags>();
  CLI::App* issue = token->add_subcommand("issue", "Print a token for a principal");
  issue->add_option("--key", is->key_file, "The signing key (token.key)")->required();
  issue->add_option("--principal", is->principal, "Who the token holder is (e.g. team-a)")
      ->required();
  issue->add_option("--ttl", is->ttl, "How long the token is valid (default 12h; at most 366d)");
  out->push_back({issue, [is] { return RunTokenIssue(*is); }});

  auto sh = std::make_shared<TokenFlags>();
  CLI::App* show = token->add_subcommand("show", "Print a token's principal and expiry");
  show->add_option("TOKEN", sh->token, "The token (default $CAIRN_TOKEN)")->envname("CAIRN_TOKEN");
  out->push_back({show, [sh] { return RunTokenShow(*sh); }});

  CLI::App* acl = app->add_subcommand(
      "acl", "The cluster's authorization policy: who may read, write or administer which paths");
  acl->require_subcommand(1);
  auto set = std::make_shared<AclFlags>();
  CLI::App* set_cmd = acl->add_subcommand("set",
                                          "Grant PRINCIPAL ACCESS on PREFIX (replaces "
                                          "that principal's grant on that prefix)");
  AddAclTarget(set_cmd, set.get());
  set_cmd->add_option("ACCESS", set->access, "read, write, admin or all, comma separated")
      ->required();
  out->push_back({set_cmd, [set] { return RunAclSet(*set); }});

  auto rm = std::make_shared<AclFlags>();
  CLI::App* rm_cmd = acl->add_subcommand("rm", "Remove PRINCIPAL's grant on PREFIX");
  AddAclTarget(rm_cmd, rm.get());
  out->push_back({rm_cmd, [rm] { return RunAclRm(*rm); }});

  auto check = std::make_shared<AclFlags>();
  CLI::App* check_cmd =
      acl->add_subcommand("check", "Print what PRINCIPAL may do on PATH under the stored policy");
  check_cmd->add_option("PRINCIPAL", check->principal, "A principal name")->required();
  check_cmd->add_option("PATH", check->prefix, "A namespace path")->required();
  AddEtcdFlag(check_cmd, &check->etcd);
  out->push_back({check_cmd, [check] { return RunAclCheck(*check); }});

  auto ls = std::make_shared<AclFlags>();
  CLI::App* ls_cmd = acl->add_subcommand("ls", "Show the policy");
  ls_cmd->add_flag("--json", ls->json, "JSON output");
  AddEtcdFlag(ls_cmd, &ls->etcd);
  out->push_back({ls_cmd, [ls] { return RunAclLs(*ls); }});

  auto reset = std::make_shared<AclFlags>();
  CLI::App* reset_cmd = acl->add_subcommand(
      "reset",
      "Replace the stored policy, even one that does not decode, by a disabled one "
      "without grants");
  AddEtcdFlag(reset_cmd, &reset->etcd);
  out->push_back({reset_cmd, [reset] {
                    auto etcd = ConnectEtcd(reset->etcd);
                    if (!etcd.ok()) return Fail(etcd.status());
                    Status s = membership::AclStore(etcd->get()).Reset();
                    if (!s.ok()) return Fail(s);
                    std::printf("policy reset: disabled, no grants\n");
                    return kExitOk;
                  }});

  for (bool enabled : {true, false}) {
    auto ef = std::make_shared<AclFlags>();
    CLI::App* cmd = acl->add_subcommand(
        enabled ? "enable" : "disable",
        enabled ? "Enforce the policy: workers deny whatever no grant allows"
                : "Stop enforcing: workers allow every request (grants are kept)");
    AddEtcdFlag(cmd, &ef->etcd);
    out->push_back({cmd, [ef, enabled] { return RunAclEnable(*ef, enabled); }});
  }
}

}  // namespace cairn::cli
