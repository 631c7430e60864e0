#include "membership/acl_store.h"

#include <gtest/gtest.h>

#include <thread>

#include "membership/memory_coordination.h"

namespace cairn::membership {
namespace {

constexpr auth::AccessSet kRead = static_cast<auth::AccessSet>(auth::Access::kRead);
constexpr auth::AccessSet kAdmin = static_cast<auth::AccessSet>(auth::Access::kAdmin);

Status AddGrant(AclStore* store, auth::Grant grant) {
  return store->Edit([&](auth::Policy* p) {
    p->grants.push_back(grant);
    return Status::Ok();
  });
}

TEST(AclStoreTest, NoDocumentMeansDisabled) {
  MemoryCoordination coord;
  AclStore store(&coord);
  auto policy = store.Get();
  ASSERT_TRUE(policy.ok());
  EXPECT_FALSE(policy->enabled);
  EXPECT_TRUE(policy->grants.empty());
  auto parsed = ParseAclSnapshot({});
  ASSERT_TRUE(parsed.ok());
  EXPECT_FALSE(parsed->enabled);
}

TEST(AclStoreTest, EditsRoundTrip) {
  MemoryCoordination coord;
  AclStore store(&coord);
  ASSERT_TRUE(AddGrant(&store, {"team-a", "/lake/a", kRead}).ok());
  ASSERT_TRUE(AddGrant(&store, {"ops", "/", kRead | kAdmin}).ok());
  ASSERT_TRUE(store
                  .Edit([](auth::Policy* p) {
                    p->enabled = true;
                    return Status::Ok();
                  })
                  .ok());
  auto policy = store.Get();
  ASSERT_TRUE(policy.ok()) << policy.status().ToString();
  EXPECT_TRUE(policy->enabled);
  ASSERT_EQ(policy->grants.size(), 2u);
  EXPECT_EQ(policy->grants[0], (auth::Grant{"team-a", "/lake/a", kRead}));
  EXPECT_EQ(policy->grants[1], (auth::Grant{"ops", "/", kRead | kAdmin}));
  auto text = coord.Get(kAclKey);
  ASSERT_TRUE(text.ok());
  auto decoded = DecodeAcl(text->value);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->grants, policy->grants);
}

TEST(AclStoreTest, InvalidEditsWriteNothing) {
  MemoryCoordination coord;
  AclStore store(&coord);
  EXPECT_EQ(AddGrant(&store, {"a b", "/x", kRead}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(AddGrant(&store, {"a", "/x/", kRead}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(coord.Get(kAclKey).status().code(), StatusCode::kNotFound);
}

TEST(AclStoreTest, MalformedDocumentsAreErrorsNeverExceptions) {
  for (const char* doc :
       {"", "[]", "{}", R"({"enabled":"yes","grants":[]})", R"({"enabled":true})",
        R"({"enabled":true,"grants":{}})", R"({"enabled":true,"grants":[1]})",
        R"({"enabled":true,"grants":[{"principal":"a","prefix":"/x"}]})",
        R"({"enabled":true,"grants":[{"principal":"a","prefix":"/x","access":"read"}]})",
        R"({"enabled":true,"grants":[{"principal":"a","prefix":"/x","access":[1]}]})",
        R"({"enabled":true,"grants":[{"principal":"a","prefix":"/x","access":["fly"]}]})",
        R"({"enabled":true,"grants":[{"principal":"a","prefix":"x","access":["read"]}]})",
        R"({"enabled":true,"grants":[{"principal":7,"prefix":"/x","access":["read"]}]})"}) {
    EXPECT_EQ(DecodeAcl(doc).status().code(), StatusCode::kInvalidArgument) << doc;
  }
  MemoryCoordination coord;
  ASSERT_TRUE(coord.Put(kAclKey, "garbage").ok());
  AclStore store(&coord);
  EXPECT_EQ(store.Get().status().code(), StatusCode::kCorruption);
  EXPECT_EQ(AddGrant(&store, {"a", "/x", kRead}).code(), StatusCode::kCorruption);
  ASSERT_TRUE(store.Reset().ok());
  auto policy = store.Get();
  ASSERT_TRUE(policy.ok());
  EXPECT_FALSE(policy->enabled);
  EXPECT_TRUE(AddGrant(&store, {"a", "/x", kRead}).ok());
}

TEST(AclStoreTest, ConcurrentEditsAreNotLost) {
  MemoryCoordination coord;
  AclStore store(&coord);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        std::string name = "p" + std::to_string(t) + "-" + std::to_string(i);
        EXPECT_TRUE(AddGrant(&store, {name, "/x", kRead}).ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  auto policy = store.Get();
  ASSERT_TRUE(policy.ok());
  EXPECT_EQ(policy->grants.size(), 20u);
}

}  // namespace
}  // namespace cairn::membership
