#include "auth/policy.h"

#include <algorithm>
#include <set>
#include <utility>

namespace cairn::auth {
namespace {

constexpr size_t kMaxPrincipalLength = 128;

bool PrincipalChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '@' || c == '-';
}

// Absolute, no empty, "." or ".." segment, no trailing '/' (except "/" itself), no NUL.
bool IsNormalized(std::string_view path) {
  if (path.empty() || path[0] != '/') return false;
  if (path == "/") return true;
  if (path.back() == '/' || path.find('\0') != std::string_view::npos) return false;
  size_t i = 1;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    std::string_view part = path.substr(i, j - i);
    if (part.empty() || part == "." || part == "..") return false;
    i = j + 1;
  }
  return true;
}

Status Denial(const Identity& who, Access access, std::string_view path) {
  return PermissionDeniedError(who.Describe() + " has no " + std::string(AccessName(access)) +
                               " grant on " + std::string(path));
}

bool Applies(const Grant& grant, const Identity& who) {
  if (who.source == Identity::Source::kAnonymous) return false;
  return grant.principal == kAnyPrincipal || grant.principal == who.principal;
}

}  // namespace

std::string_view AccessName(Access access) {
  switch (access) {
    case Access::kRead:
      return "read";
    case Access::kWrite:
      return "write";
    case Access::kAdmin:
      return "admin";
  }
  return "?";
}

std::string AccessSetName(AccessSet set) {
  std::string out;
  for (Access a : {Access::kRead, Access::kWrite, Access::kAdmin}) {
    if ((set & static_cast<AccessSet>(a)) == 0) continue;
    if (!out.empty()) out += ',';
    out += AccessName(a);
  }
  return out.empty() ? "none" : out;
}

StatusOr<AccessSet> ParseAccessSet(std::string_view text) {
  AccessSet set = 0;
  size_t i = 0;
  while (i <= text.size()) {
    size_t j = text.find(',', i);
    if (j == std::string_view::npos) j = text.size();
    std::string_view word = text.substr(i, j - i);
    if (word == "read") {
      set |= static_cast<AccessSet>(Access::kRead);
    } else if (word == "write") {
      set |= static_cast<AccessSet>(Access::kWrite);
    } else if (word == "admin") {
      set |= static_cast<AccessSet>(Access::kAdmin);
    } else if (word == "all") {
      set |= kAllAccess;
    } else {
      return InvalidArgumentError("unknown access '" + std::string(word.substr(0, 32)) +
                                  "' (expected read, write, admin or all, comma separated)");
    }
    i = j + 1;
  }
  return set;
}

Status ValidatePrincipal(std::string_view principal) {
  if (principal == kAnyPrincipal) return Status::Ok();
  if (principal.empty()) return InvalidArgumentError("principal must not be empty");
  if (principal.size() > kMaxPrincipalLength) {
    return InvalidArgumentError("principal longer than " + std::to_string(kMaxPrincipalLength) +
                                " bytes");
  }
  for (char c : principal) {
    if (!PrincipalChar(c)) {
      return InvalidArgumentError(
          "principal may only contain letters, digits and . _ @ - (got a byte 0x" +
          std::to_string(static_cast<unsigned char>(c)) + ")");
    }
  }
  return Status::Ok();
}

bool PrefixCovers(std::string_view prefix, std::string_view path) {
  if (prefix == "/") return !path.empty() && path[0] == '/';
  if (!path.starts_with(prefix)) return false;
  return path.size() == prefix.size() || path[prefix.size()] == '/';
}

std::string Identity::Describe() const {
  switch (source) {
    case Source::kAnonymous:
      return "an anonymous client";
    case Source::kCertificate:
      return "principal '" + principal + "' (certificate)";
    case Source::kToken:
      return "principal '" + principal + "' (token)";
  }
  return "?";
}

AccessSet AccessOn(const Policy& policy, const Identity& who, std::string_view path) {
  if (!policy.enabled) return kAllAccess;
  AccessSet set = 0;
  for (const Grant& g : policy.grants) {
    if (Applies(g, who) && PrefixCovers(g.prefix, path)) set |= g.access;
  }
  return set;
}

Status Authorize(const Policy& policy, const Identity& who, std::string_view path, Access access) {
  if ((AccessOn(policy, who, path) & static_cast<AccessSet>(access)) != 0) return Status::Ok();
  return Denial(who, access, path);
}

PolicyIndex::PolicyIndex(Policy policy) : policy_(std::move(policy)) {
  for (const Grant& g : policy_.grants) {
    if (g.principal == kAnyPrincipal) {
      anyone_.push_back(&g);
    } else {
      by_principal_[g.principal].push_back(&g);
    }
  }
}

template <typename F>
void PolicyIndex::ForEachGrantOf(const Identity& who, F&& f) const {
  if (who.source == Identity::Source::kAnonymous) return;
  for (const Grant* g : anyone_) f(*g);
  auto it = by_principal_.find(who.principal);
  if (it == by_principal_.end()) return;
  for (const Grant* g : it->second) f(*g);
}

AccessSet PolicyIndex::AccessOn(const Identity& who, std::string_view path) const {
  if (!policy_.enabled) return kAllAccess;
  AccessSet set = 0;
  ForEachGrantOf(who, [&](const Grant& g) {
    if (PrefixCovers(g.prefix, path)) set |= g.access;
  });
  return set;
}

Status PolicyIndex::Authorize(const Identity& who, std::string_view path, Access access) const {
  if ((AccessOn(who, path) & static_cast<AccessSet>(access)) != 0) return Status::Ok();
  return Denial(who, access, path);
}

bool Visibility::Shows(std::string_view name) const {
  return everything || std::binary_search(children.begin(), children.end(), name);
}

StatusOr<Visibility> PolicyIndex::VisibleIn(const Identity& who, std::string_view dir) const {
  Visibility v;
  if ((AccessOn(who, dir) & static_cast<AccessSet>(Access::kRead)) != 0) {
    v.everything = true;
    return v;
  }
  // The first component below `dir` of each read grant strictly under it.
  const size_t skip = dir == "/" ? 1 : dir.size() + 1;
  ForEachGrantOf(who, [&](const Grant& g) {
    if ((g.access & static_cast<AccessSet>(Access::kRead)) == 0) return;
    if (g.prefix.size() <= dir.size() || !PrefixCovers(dir, g.prefix)) return;
    std::string_view rest = std::string_view(g.prefix).substr(skip);
    v.children.emplace_back(rest.substr(0, rest.find('/')));
  });
  if (v.children.empty()) {
    return PermissionDeniedError(who.Describe() + " has no read grant on " + std::string(dir) +
                                 " or below it");
  }
  std::sort(v.children.begin(), v.children.end());
  v.children.erase(std::unique(v.children.begin(), v.children.end()), v.children.end());
  return v;
}

Status ValidatePolicy(const Policy& policy) {
  std::set<std::pair<std::string_view, std::string_view>> seen;
  for (const Grant& g : policy.grants) {
    const std::string where =
        "grant (" + g.principal.substr(0, 64) + ", " + g.prefix.substr(0, 256) + ")";
    Status p = ValidatePrincipal(g.principal);
    if (!p.ok()) return InvalidArgumentError(where + ": " + p.message());
    if (!IsNormalized(g.prefix)) {
      return InvalidArgumentError(where +
                                  ": the prefix must be an absolute path without '.', '..', "
                                  "empty segments or a trailing '/'");
    }
    if (g.access == 0 || (g.access & ~kAllAccess) != 0) {
      return InvalidArgumentError(where + ": no valid access (read, write, admin)");
    }
    if (!seen.emplace(g.principal, g.prefix).second) {
      return InvalidArgumentError(where + ": listed twice");
    }
  }
  return Status::Ok();
}

}  // namespace cairn::auth
