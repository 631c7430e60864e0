// Authorization policy: who may do what under which namespace path. Pure code (no I/O, clocks
// or threads), so workers, the CLI and the tests share one implementation of the rules:
//
//   * A grant gives a principal a set of accesses (read, write, admin) on a path prefix. A
//     prefix covers itself and everything below it on '/' boundaries: "/data" covers "/data"
//     and "/data/x", never "/data2". The prefix "/" covers every path.
//   * The principal "*" in a grant means every authenticated principal (never an anonymous
//     connection).
//   * Accesses are independent: admin does not imply read. `cairn load` of a path needs admin,
//     reading its bytes needs read.
//   * A disabled policy allows everything (the default: a cluster without a policy behaves as
//     before). An enabled one denies whatever no grant allows.
//   * Cluster nodes (workers, identified by a node certificate of the cluster CA) may make the
//     requests workers make to each other; grants do not apply to them.
//
// The document that carries a policy lives in etcd (membership/acl_store.h).
#ifndef CAIRN_AUTH_POLICY_H_
#define CAIRN_AUTH_POLICY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"

namespace cairn::auth {

enum class Access : uint8_t { kRead = 1, kWrite = 2, kAdmin = 4 };
using AccessSet = uint8_t;  // Bits of Access.
inline constexpr AccessSet kAllAccess = 7;

std::string_view AccessName(Access access);
// "read,write" for the bits of `set` ("none" for 0).
std::string AccessSetName(AccessSet set);
// Parses "read", "write", "admin", "all", comma separated. InvalidArgument for anything else or
// an empty list.
StatusOr<AccessSet> ParseAccessSet(std::string_view text);

// Principal names: 1-128 bytes of [A-Za-z0-9._@-] (the names certificates and tokens carry), or
// "*" in a grant. InvalidArgument naming the problem.
Status ValidatePrincipal(std::string_view principal);
inline constexpr std::string_view kAnyPrincipal = "*";

// Whether `prefix` covers `path` (both normalised: absolute, no trailing '/' except "/").
bool PrefixCovers(std::string_view prefix, std::string_view path);

struct Grant {
  std::string principal;
  std::string prefix;  // Normalised namespace path.
  AccessSet access = 0;
  bool operator==(const Grant&) const = default;
};

struct Policy {
  bool enabled = false;
  std::vector<Grant> grants;
};

// Who sent a request, as established by the connection (certificate, token, or nothing).
struct Identity {
  enum class Source : uint8_t { kAnonymous, kCertificate, kToken };
  Source source = Source::kAnonymous;
  std::string principal;         // Empty when anonymous.
  bool cluster_node = false;     // A worker of this cluster (node certificate).
  std::string Describe() const;  // "principal team-a (token)", "an anonymous client", ...
};

// OK, or PermissionDenied "<who> has no <access> grant on <path>" (the message a client
// shows). `path` must be normalised.
Status Authorize(const Policy& policy, const Identity& who, std::string_view path, Access access);

// The accesses `who` holds on `path` (all of them when the policy is disabled).
AccessSet AccessOn(const Policy& policy, const Identity& who, std::string_view path);

// What a principal may see of a directory's entries, in a listing or a stat. Read on the
// directory shows everything in it. Without it, a principal still sees the way down to its own
// read grants below the directory: a team granted read on /lake/team-a lists /lake and finds
// "team-a" only, whatever else /lake holds (those names are in the policy the principal was
// given, so showing them reveals nothing a grant does not). Nothing else of the directory is
// shown; with neither, the directory is refused.
struct Visibility {
  bool everything = false;
  std::vector<std::string> children;  // When !everything: sorted, unique names.
  bool Shows(std::string_view name) const;
};

// A policy prepared for checks on every request: the grants of each principal apart (and those
// of "*"), so a check costs the grants that apply to the caller, not every grant of the
// cluster. Answers exactly as Authorize and AccessOn above. Immutable; share it.
class PolicyIndex {
 public:
  explicit PolicyIndex(Policy policy);
  const Policy& policy() const { return policy_; }
  bool enabled() const { return policy_.enabled; }
  AccessSet AccessOn(const Identity& who, std::string_view path) const;
  Status Authorize(const Identity& who, std::string_view path, Access access) const;
  // What `who` may see in the directory `dir` (normalised; see Visibility). PermissionDenied
  // "<who> has no read grant on <dir> or below it" when nothing.
  StatusOr<Visibility> VisibleIn(const Identity& who, std::string_view dir) const;

 private:
  // The grants that apply to `who` (none for an anonymous identity).
  template <typename F>
  void ForEachGrantOf(const Identity& who, F&& f) const;

  Policy policy_;
  std::unordered_map<std::string, std::vector<const Grant*>> by_principal_;
  std::vector<const Grant*> anyone_;  // Grants to "*".
};

// Checks the grants: valid principals, normalised absolute prefixes, non-empty access sets, no
// two grants for the same (principal, prefix). InvalidArgument naming the grant.
Status ValidatePolicy(const Policy& policy);

}  // namespace cairn::auth

#endif  // CAIRN_AUTH_POLICY_H_
