// `cairn cert ca|issue|show`: a cluster's private CA and the certificates it signs
// (docs/security.md). Keys are written 0600 and never overwritten unless --force is given.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "cli/common.h"
#include "common/file_util.h"
#include "tls/certificates.h"

namespace cairn::cli {
namespace {

struct CertFlags {
  std::string out_dir = ".";
  std::string name;
  std::string ca_dir;
  std::vector<std::string> hosts;
  bool client = false;
  int days = 0;
  bool force = false;
  std::string file;
};

Status WritePair(const CertFlags& f, const std::string& stem, const tls::KeyAndCert& pair) {
  const std::string key = f.out_dir + "/" + stem + ".key";
  const std::string crt = f.out_dir + "/" + stem + ".crt";
  if (!f.force) {
    for (const std::string& p : {key, crt}) {
      if (access(p.c_str(), F_OK) == 0) {
        return AlreadyExistsError(p + " exists (give --force to replace it)");
      }
    }
  }
  CAIRN_RETURN_IF_ERROR(WriteNewFile(key, pair.key_pem, 0600, f.force));
  CAIRN_RETURN_IF_ERROR(WriteNewFile(crt, pair.cert_pem, 0644, f.force));
  std::printf("wrote %s and %s\n", crt.c_str(), key.c_str());
  return Status::Ok();
}

int RunCa(const CertFlags& f) {
  const int days = f.days > 0 ? f.days : 3650;
  auto ca = tls::CreateCertificateAuthority(f.name.empty() ? "cairn-ca" : f.name,
                                            std::chrono::hours(24) * days);
  if (!ca.ok()) return Fail(ca.status());
  Status s = WritePair(f, "ca", *ca);
  if (!s.ok()) return Fail(s);
  std::printf("CA valid for %d days; keep ca.key offline, give ca.crt to every node and client\n",
              days);
  return kExitOk;
}

// NAME becomes a file name: no path separators, no leading dot.
Status CheckFileStem(const std::string& name) {
  if (name.empty() || name.front() == '.' || name.size() > 64) {
    return InvalidArgumentError("certificate name '" + name +
                                "' must be 1 to 64 characters and not start with '.'");
  }
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-' &&
        c != '@') {
      return InvalidArgumentError("certificate name '" + name +
                                  "' may only contain A-Z a-z 0-9 . _ - @ (it names the files)");
    }
  }
  return Status::Ok();
}

int RunIssue(const CertFlags& f) {
  if (Status s = CheckFileStem(f.name); !s.ok()) return Fail(s);
  auto ca_cert = ReadSmallFile(f.ca_dir + "/ca.crt");
  if (!ca_cert.ok()) return Fail(ca_cert.status().WithContext("--ca"));
  auto ca_key = ReadSmallFile(f.ca_dir + "/ca.key");
  if (!ca_key.ok()) return Fail(ca_key.status().WithContext("--ca"));
  tls::CertSpec spec;
  spec.common_name = f.name;
  spec.hosts = f.hosts;
  spec.role = f.client ? tls::CertRole::kClient : tls::CertRole::kNode;
  spec.valid_for = std::chrono::hours(24) * (f.days > 0 ? f.days : 365);
  if (f.client && !f.hosts.empty()) {
    return Fail(InvalidArgumentError("--client certificates name no hosts (drop --host)"));
  }
  auto issued = tls::IssueCertificate({*ca_key, *ca_cert}, spec);
  if (!issued.ok()) return Fail(issued.status());
  Status s = WritePair(f, f.name, *issued);
  if (!s.ok()) return Fail(s);
  return kExitOk;
}

int RunShow(const CertFlags& f) {
  auto pem = ReadSmallFile(f.file);
  if (!pem.ok()) return Fail(pem.status());
  auto name = tls::CertificateCommonName(*pem);
  if (!name.ok()) return Fail(name.status().WithContext(f.file));
  auto left = tls::CertificateSecondsLeft(*pem);
  if (!left.ok()) return Fail(left.status().WithContext(f.file));
  std::printf("principal: %s\n", name->c_str());
  if (*left < 0) {
    std::printf("expired %lld days ago\n", static_cast<long long>(-*left / 86400));
    return kExitError;
  }
  std::printf("expires in %lld days\n", static_cast<long long>(*left / 86400));
  return kExitOk;
}

}  // namespace

void RegisterCertCommands(CLI::App* app, std::vector<std::pair<CLI::App*, Runner>>* out) {
  CLI::App* cert = app->add_subcommand(
      "cert", "Make a cluster's private CA and its node and client certificates (TLS)");
  cert->require_subcommand(1);

  auto ca_flags = std::make_shared<CertFlags>();
  CLI::App* ca = cert->add_subcommand("ca", "Create a CA: writes ca.crt and ca.key (0600)");
  ca->add_option("--out", ca_flags->out_dir, "Folder to write to (default .)");
  ca->add_option("--name", ca_flags->name, "The CA's name (default cairn-ca)");
  ca->add_option("--days", ca_flags->days, "Validity in days (default 3650)")
      ->check(CLI::Range(1, 36500));
  ca->add_flag("--force", ca_flags->force, "Replace existing files");
  out->push_back({ca, [ca_flags] { return RunCa(*ca_flags); }});

  auto is_flags = std::make_shared<CertFlags>();
  CLI::App* issue = cert->add_subcommand(
      "issue", "Issue a node or client certificate: writes NAME.crt and NAME.key (0600)");
  issue->add_option("NAME", is_flags->name, "Common name: the principal (a worker id, a team)")
      ->required();
  issue->add_option("--ca", is_flags->ca_dir, "Folder holding ca.crt and ca.key")->required();
  issue->add_option("--out", is_flags->out_dir, "Folder to write to (default .)");
  issue->add_option("--host", is_flags->hosts,
                    "Host name or IP address the node is reached by (repeat; nodes need one)");
  issue->add_flag("--client", is_flags->client,
                  "A client certificate (clients, jobs, operators) instead of a node's");
  issue->add_option("--days", is_flags->days, "Validity in days (default 365)")
      ->check(CLI::Range(1, 36500));
  issue->add_flag("--force", is_flags->force, "Replace existing files");
  out->push_back({issue, [is_flags] { return RunIssue(*is_flags); }});

  auto show_flags = std::make_shared<CertFlags>();
  CLI::App* show = cert->add_subcommand(
      "show", "Print a certificate's principal and days to expiry (exit 1 if expired)");
  show->add_option("FILE", show_flags->file, "PEM certificate")->required();
  out->push_back({show, [show_flags] { return RunShow(*show_flags); }});
}

}  // namespace cairn::cli
