// Resolution of S3 settings (credentials, region, endpoint) the way the AWS CLI and SDKs do it,
// restricted to static sources:
//   credentials: UfsOptions (access_key + secret_key [+ session_token]), else the environment
//     (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), else the profile in the
//     shared credentials file (AWS_SHARED_CREDENTIALS_FILE, default ~/.aws/credentials), else the
//     profile in the config file (AWS_CONFIG_FILE, default ~/.aws/config); none found means
//     anonymous, unsigned requests (public buckets).
//   profile: UfsOptions.profile, else AWS_PROFILE, else "default".
//   region: UfsOptions.region, else AWS_REGION, else AWS_DEFAULT_REGION, else the profile's
//     "region" in the config file, else "us-east-1".
//   endpoint: UfsOptions.endpoint, else AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, else the
//     profile's "endpoint_url" in the config file, else https://s3.<region>.amazonaws.com.
// Not supported (documented gaps): credential_process, SSO, web identity, EC2/ECS instance
// roles, assume-role profiles.
//
// The environment is read through an injected lookup so tests do not touch the process env.
// Pure functions; thread-safe.
#ifndef CAIRN_UFS_AWS_CREDENTIALS_H_
#define CAIRN_UFS_AWS_CREDENTIALS_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "ufs/ufs.h"

namespace cairn::ufs::s3 {

struct AwsCredentials {
  std::string access_key;
  std::string secret_key;
  std::string session_token;  // Empty unless temporary credentials.
  bool anonymous() const { return access_key.empty(); }
};

struct AwsSettings {
  AwsCredentials credentials;
  // Where the credentials came from, for error messages ("environment", "options",
  // "/home/u/.aws/credentials [profile prod]", "none (anonymous)"). Never the secret itself.
  std::string credentials_source;
  std::string region;
  std::string endpoint;  // Full URL, e.g. "https://s3.us-east-1.amazonaws.com".
};

// Section name -> key -> value. Keys are lowercased; values trimmed. A nested block
// ("s3 =" followed by indented "key = value" lines) is stored as "s3.key".
using IniFile = std::map<std::string, std::map<std::string, std::string>>;

// Parses the INI dialect of ~/.aws/{credentials,config}: "[section]" headers, "key = value"
// lines, '#' and ';' comment lines. InvalidArgument (with the line number) for a line that is
// none of these.
StatusOr<IniFile> ParseIni(std::string_view text);

// Returns the value of environment variable `name`, or nullopt if unset.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;
// Reads the process environment.
EnvLookup ProcessEnv();

// Applies the precedence rules above. Missing credential/config files are fine; an unreadable
// or malformed one is InvalidArgument naming the file; a profile named explicitly (options or
// AWS_PROFILE) that neither file contains is InvalidArgument; an access key without a secret
// (or vice versa) in one source is InvalidArgument.
StatusOr<AwsSettings> ResolveAwsSettings(const UfsOptions& options, const EnvLookup& env);

}  // namespace cairn::ufs::s3

#endif  // CAIRN_UFS_AWS_CREDENTIALS_H_
