#include "ufs/aws_credentials.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace cairn::ufs::s3 {
namespace {

// AWS credential/config files are tiny; anything larger is not one.
constexpr size_t kMaxConfigFileBytes = 1 << 20;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// nullopt if the file does not exist; an error if it exists but cannot be read.
StatusOr<std::optional<std::string>> ReadOptionalFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return std::optional<std::string>();
    return InvalidArgumentError("cannot read AWS file " + path + ": " + std::strerror(errno));
  }
  std::string text;
  char buf[8192];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return InvalidArgumentError("cannot read AWS file " + path + ": " + std::strerror(err));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxConfigFileBytes) {
      ::close(fd);
      return InvalidArgumentError("AWS file " + path + " is larger than 1 MiB");
    }
  }
  ::close(fd);
  return std::optional<std::string>(std::move(text));
}

struct LoadedIni {
  std::string path;
  IniFile ini;
};

StatusOr<std::optional<LoadedIni>> LoadIni(const std::string& path) {
  if (path.empty()) return std::optional<LoadedIni>();
  CAIRN_ASSIGN_OR_RETURN(std::optional<std::string> text, ReadOptionalFile(path));
  if (!text) return std::optional<LoadedIni>();
  StatusOr<IniFile> ini = ParseIni(*text);
  if (!ini.ok()) return ini.status().WithContext(path);
  return std::optional<LoadedIni>(LoadedIni{path, std::move(ini).value()});
}

const std::map<std::string, std::string>* FindSection(const std::optional<LoadedIni>& file,
                                                      const std::string& name) {
  if (!file) return nullptr;
  auto it = file->ini.find(name);
  return it == file->ini.end() ? nullptr : &it->second;
}

std::string Get(const std::map<std::string, std::string>* section, const std::string& key) {
  if (section == nullptr) return "";
  auto it = section->find(key);
  return it == section->end() ? "" : it->second;
}

std::string FirstSet(const EnvLookup& env, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    std::optional<std::string> v = env(name);
    if (v && !v->empty()) return *v;
  }
  return "";
}

// Fills `out` from a pair of key names if either is set; InvalidArgument if only one is.
Status TakeKeys(std::string access, std::string secret, std::string token, std::string source,
                AwsSettings& out, bool& found) {
  if (access.empty() && secret.empty()) return Status::Ok();
  if (access.empty() || secret.empty()) {
    return InvalidArgumentError(source + " sets " +
                                (access.empty() ? "a secret key without an access key"
                                                : "an access key without a secret key"));
  }
  out.credentials = {std::move(access), std::move(secret), std::move(token)};
  out.credentials_source = std::move(source);
  found = true;
  return Status::Ok();
}

}  // namespace

StatusOr<IniFile> ParseIni(std::string_view text) {
  IniFile ini;
  std::string section;
  std::string open_block;  // Key of the last "key =" line with an empty value.
  int line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view raw = text.substr(pos, nl == std::string_view::npos ? text.npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
    ++line_no;
    std::string_view line = Trim(raw);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    bool indented = std::isspace(static_cast<unsigned char>(raw.front())) != 0;
    if (line.front() == '[') {
      if (line.back() != ']') {
        return InvalidArgumentError("line " + std::to_string(line_no) + ": unterminated '['");
      }
      section = std::string(Trim(line.substr(1, line.size() - 2)));
      ini[section];
      open_block.clear();
      continue;
    }
    size_t eq = line.find('=');
    if (eq == std::string_view::npos) {
      return InvalidArgumentError("line " + std::to_string(line_no) +
                                  ": expected 'key = value' or '[section]'");
    }
    std::string key = Lower(Trim(line.substr(0, eq)));
    std::string value(Trim(line.substr(eq + 1)));
    if (indented && !open_block.empty()) {
      ini[section][open_block + "." + key] = std::move(value);
      continue;
    }
    open_block = value.empty() ? key : "";
    ini[section][key] = std::move(value);
  }
  return ini;
}

EnvLookup ProcessEnv() {
  return [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

StatusOr<AwsSettings> ResolveAwsSettings(const UfsOptions& options, const EnvLookup& env) {
  std::string env_profile = FirstSet(env, {"AWS_PROFILE"});
  bool explicit_profile = !options.profile.empty() || !env_profile.empty();
  std::string profile = !options.profile.empty() ? options.profile
                        : !env_profile.empty()   ? env_profile
                                                 : "default";
  std::string home = FirstSet(env, {"HOME"});
  std::string cred_path = FirstSet(env, {"AWS_SHARED_CREDENTIALS_FILE"});
  if (cred_path.empty() && !home.empty()) cred_path = home + "/.aws/credentials";
  std::string config_path = FirstSet(env, {"AWS_CONFIG_FILE"});
  if (config_path.empty() && !home.empty()) config_path = home + "/.aws/config";

  CAIRN_ASSIGN_OR_RETURN(std::optional<LoadedIni> cred_file, LoadIni(cred_path));
  CAIRN_ASSIGN_OR_RETURN(std::optional<LoadedIni> config_file, LoadIni(config_path));
  const auto* cred_section = FindSection(cred_file, profile);
  // The config file names non-default profiles "[profile name]".
  const auto* config_section = FindSection(config_file, "profile " + profile);
  if (config_section == nullptr && profile == "default") {
    config_section = FindSection(config_file, "default");
  }

  AwsSettings out;
  bool found = false;
  CAIRN_RETURN_IF_ERROR(TakeKeys(options.access_key, options.secret_key, options.session_token,
                                 "options", out, found));
  if (!found) {
    CAIRN_RETURN_IF_ERROR(TakeKeys(
        FirstSet(env, {"AWS_ACCESS_KEY_ID"}), FirstSet(env, {"AWS_SECRET_ACCESS_KEY"}),
        FirstSet(env, {"AWS_SESSION_TOKEN"}), "environment (AWS_ACCESS_KEY_ID)", out, found));
  }
  if (!found && explicit_profile && cred_section == nullptr && config_section == nullptr) {
    return InvalidArgumentError("AWS profile '" + profile + "' not found in " +
                                (cred_path.empty() ? "(no credentials file)" : cred_path) + " or " +
                                (config_path.empty() ? "(no config file)" : config_path));
  }
  if (!found && cred_section != nullptr) {
    CAIRN_RETURN_IF_ERROR(TakeKeys(Get(cred_section, "aws_access_key_id"),
                                   Get(cred_section, "aws_secret_access_key"),
                                   Get(cred_section, "aws_session_token"),
                                   cred_file->path + " [" + profile + "]", out, found));
  }
  if (!found && config_section != nullptr) {
    CAIRN_RETURN_IF_ERROR(TakeKeys(Get(config_section, "aws_access_key_id"),
                                   Get(config_section, "aws_secret_access_key"),
                                   Get(config_section, "aws_session_token"),
                                   config_file->path + " [profile " + profile + "]", out, found));
  }
  if (!found) out.credentials_source = "none (anonymous requests)";

  out.region = options.region;
  if (out.region.empty()) out.region = FirstSet(env, {"AWS_REGION", "AWS_DEFAULT_REGION"});
  if (out.region.empty()) out.region = Get(config_section, "region");
  if (out.region.empty()) out.region = "us-east-1";

  out.endpoint = options.endpoint;
  if (out.endpoint.empty())
    out.endpoint = FirstSet(env, {"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"});
  if (out.endpoint.empty()) out.endpoint = Get(config_section, "s3.endpoint_url");
  if (out.endpoint.empty()) out.endpoint = Get(config_section, "endpoint_url");
  if (out.endpoint.empty()) out.endpoint = "https://s3." + out.region + ".amazonaws.com";
  return out;
}

}  // namespace cairn::ufs::s3
