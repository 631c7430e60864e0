#include "ufs/aws_credentials.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace cairn::ufs::s3 {
namespace {

namespace fs = std::filesystem;

TEST(ParseIniTest, SectionsKeysCommentsAndNestedBlocks) {
  auto ini = ParseIni(
      "# comment\n"
      "[default]\n"
      "aws_access_key_id = AKID\r\n"
      "AWS_Secret_Access_Key=  s3cr=t  \n"
      "; another comment\n"
      "\n"
      "[profile prod]\n"
      "region = eu-west-1\n"
      "s3 =\n"
      "  endpoint_url = http://minio:9000\n"
      "  addressing_style = path\n"
      "output = json\n");
  ASSERT_TRUE(ini.ok()) << ini.status().ToString();
  EXPECT_EQ((*ini)["default"]["aws_access_key_id"], "AKID");
  EXPECT_EQ((*ini)["default"]["aws_secret_access_key"], "s3cr=t");
  EXPECT_EQ((*ini)["profile prod"]["region"], "eu-west-1");
  EXPECT_EQ((*ini)["profile prod"]["s3.endpoint_url"], "http://minio:9000");
  EXPECT_EQ((*ini)["profile prod"]["s3.addressing_style"], "path");
  EXPECT_EQ((*ini)["profile prod"]["output"], "json");
}

TEST(ParseIniTest, RejectsGarbageWithLineNumber) {
  auto ini = ParseIni("[default]\nthis is not ini\n");
  EXPECT_EQ(ini.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(ini.status().message().find("line 2"), std::string::npos);
  EXPECT_EQ(ParseIni("[broken\n").status().code(), StatusCode::kInvalidArgument);
}

class ResolveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "cairn-aws-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    home_ = tmpl;
    fs::create_directories(home_ + "/.aws");
    env_["HOME"] = home_;
  }
  void TearDown() override { fs::remove_all(home_); }

  void File(const std::string& name, const std::string& text) {
    std::ofstream(home_ + "/.aws/" + name) << text;
  }
  StatusOr<AwsSettings> Resolve(const UfsOptions& o = {}) {
    return ResolveAwsSettings(o, [this](const char* name) -> std::optional<std::string> {
      auto it = env_.find(name);
      if (it == env_.end()) return std::nullopt;
      return it->second;
    });
  }

  std::string home_;
  std::map<std::string, std::string> env_;
};

TEST_F(ResolveTest, NothingConfiguredMeansAnonymousAwsInUsEast1) {
  auto s = Resolve();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(s->credentials.anonymous());
  EXPECT_EQ(s->region, "us-east-1");
  EXPECT_EQ(s->endpoint, "https://s3.us-east-1.amazonaws.com");
}

TEST_F(ResolveTest, OptionsBeatEnvironmentBeatFiles) {
  File("credentials", "[default]\naws_access_key_id=FILEKEY\naws_secret_access_key=FILESECRET\n");
  env_["AWS_ACCESS_KEY_ID"] = "ENVKEY";
  env_["AWS_SECRET_ACCESS_KEY"] = "ENVSECRET";
  env_["AWS_SESSION_TOKEN"] = "ENVTOKEN";
  env_["AWS_REGION"] = "eu-central-1";
  UfsOptions o;
  o.access_key = "OPTKEY";
  o.secret_key = "OPTSECRET";
  auto s = Resolve(o);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->credentials.access_key, "OPTKEY");
  EXPECT_EQ(s->credentials.session_token, "");
  EXPECT_EQ(s->credentials_source, "options");
  EXPECT_EQ(s->region, "eu-central-1");
  EXPECT_EQ(s->endpoint, "https://s3.eu-central-1.amazonaws.com");

  s = Resolve();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->credentials.access_key, "ENVKEY");
  EXPECT_EQ(s->credentials.session_token, "ENVTOKEN");
  EXPECT_NE(s->credentials_source.find("environment"), std::string::npos);

  env_.erase("AWS_ACCESS_KEY_ID");
  env_.erase("AWS_SECRET_ACCESS_KEY");
  s = Resolve();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->credentials.access_key, "FILEKEY");
  EXPECT_EQ(s->credentials.secret_key, "FILESECRET");
  EXPECT_NE(s->credentials_source.find(".aws/credentials [default]"), std::string::npos);
}

TEST_F(ResolveTest, ProfileFromEnvironmentAndConfigFile) {
  File("credentials", "[prod]\naws_access_key_id=PK\naws_secret_access_key=PS\n");
  File("config", "[profile prod]\nregion = ap-south-1\nendpoint_url = http://minio:9000\n");
  env_["AWS_PROFILE"] = "prod";
  auto s = Resolve();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->credentials.access_key, "PK");
  EXPECT_EQ(s->region, "ap-south-1");
  EXPECT_EQ(s->endpoint, "http://minio:9000");
  env_["AWS_DEFAULT_REGION"] = "us-west-2";
  env_["AWS_ENDPOINT_URL"] = "http://other:1";
  s = Resolve();
  EXPECT_EQ(s->region, "us-west-2");
  EXPECT_EQ(s->endpoint, "http://other:1");
  UfsOptions o;
  o.endpoint = "http://opt:2";
  o.region = "r1";
  s = Resolve(o);
  EXPECT_EQ(s->region, "r1");
  EXPECT_EQ(s->endpoint, "http://opt:2");
}

TEST_F(ResolveTest, CustomFileLocationsAndKeysInConfig) {
  std::string other = home_ + "/elsewhere.ini";
  std::ofstream(other) << "[profile x]\naws_access_key_id=CK\naws_secret_access_key=CS\n"
                          "aws_session_token=CT\n";
  env_["AWS_CONFIG_FILE"] = other;
  env_["AWS_SHARED_CREDENTIALS_FILE"] = home_ + "/does-not-exist";
  UfsOptions o;
  o.profile = "x";
  auto s = Resolve(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->credentials.access_key, "CK");
  EXPECT_EQ(s->credentials.session_token, "CT");
  EXPECT_NE(s->credentials_source.find("elsewhere.ini"), std::string::npos);
}

TEST_F(ResolveTest, Errors) {
  UfsOptions o;
  o.profile = "missing";
  EXPECT_EQ(Resolve(o).status().code(), StatusCode::kInvalidArgument);
  UfsOptions half;
  half.access_key = "only-key";
  EXPECT_EQ(Resolve(half).status().code(), StatusCode::kInvalidArgument);
  env_["AWS_SECRET_ACCESS_KEY"] = "only-secret";
  EXPECT_EQ(Resolve().status().code(), StatusCode::kInvalidArgument);
  env_.erase("AWS_SECRET_ACCESS_KEY");
  File("credentials", "[default]\ngarbage line\n");
  auto bad = Resolve();
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("credentials"), std::string::npos);
}

}  // namespace
}  // namespace cairn::ufs::s3
