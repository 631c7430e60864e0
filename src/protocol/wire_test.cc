#include "protocol/wire.h"

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <set>

#include "common/checksum.h"

namespace cairn::protocol {
namespace {

TEST(WireTest, FrameHeaderRoundTrips) {
  FrameHeader h{MessageType::kReadPage, 0, 0x1122334455667788ull, 1234};
  std::array<char, kFrameHeaderSize> buf;
  EncodeFrameHeader(h, buf.data());
  auto d = DecodeFrameHeader(buf);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->type, MessageType::kReadPage);
  EXPECT_EQ(d->request_id, h.request_id);
  EXPECT_EQ(d->payload_length, 1234u);
  EXPECT_EQ(FrameVersion(buf), kVersion);
}

TEST(WireTest, CorruptHeadersAreRejected) {
  FrameHeader h{MessageType::kPing, 0, 7, 0};
  std::array<char, kFrameHeaderSize> buf;
  EncodeFrameHeader(h, buf.data());
  for (size_t i = 0; i < kFrameHeaderSize; ++i) {
    auto copy = buf;
    copy[i] ^= 0x40;
    EXPECT_FALSE(DecodeFrameHeader(copy).ok()) << "flip at byte " << i;
  }
  h.payload_length = kMaxPayload + 1;
  EncodeFrameHeader(h, buf.data());
  EXPECT_EQ(DecodeFrameHeader(buf).status().code(), StatusCode::kCorruption);
}

// A header whose type byte is `type`, re-sealed so that only the type can be wrong.
std::array<char, kFrameHeaderSize> HeaderOfType(uint8_t type) {
  std::array<char, kFrameHeaderSize> buf;
  EncodeFrameHeader({MessageType::kPing, 0, 1, 0}, buf.data());
  buf[5] = static_cast<char>(type);
  uint32_t check = static_cast<uint32_t>(Hash64(std::string_view(buf.data(), 20)));
  std::memcpy(buf.data() + 20, &check, 4);
  return buf;
}

// v5 took type 15 (kept for WritePage) and 19..25; v7 26 (MakeDir) and 27 (Rename); v8 28
// (SyncPath); v9 29 (ReadWritten); v10 no new type; v11 30 (ListPending); v12 31 (HandOver);
// v13 32 (KeepWrite).
TEST(WireTest, FrameHeadersAcceptEveryV13TypeAndNothingElse) {
  for (int type = 1; type <= 32; ++type) {
    auto d = DecodeFrameHeader(HeaderOfType(static_cast<uint8_t>(type)));
    ASSERT_TRUE(d.ok()) << type << ": " << d.status().ToString();
    EXPECT_EQ(static_cast<int>(d->type), type);
  }
  for (int type : {0, 33, 34, 255}) {
    EXPECT_EQ(DecodeFrameHeader(HeaderOfType(static_cast<uint8_t>(type))).status().code(),
              StatusCode::kCorruption)
        << type;
  }
}

// A frame of another version (right magic and checksum) is a version mismatch, told apart from
// garbage so the receiver can answer with kVersionMismatch.
TEST(WireTest, OtherVersionsAreAMismatchNotCorruption) {
  std::array<char, kFrameHeaderSize> buf;
  EncodeFrameHeader({MessageType::kHello, 0, 1, 0}, buf.data());
  std::vector<uint8_t> others = {uint8_t{kVersion + 1}, uint8_t{200}};
  for (uint8_t v = 1; v < kMinVersion; ++v) others.push_back(v);
  for (uint8_t version : others) {
    auto copy = buf;
    copy[4] = static_cast<char>(version);
    // Re-seal the header checksum over the changed version byte.
    uint32_t check = static_cast<uint32_t>(Hash64(std::string_view(copy.data(), 20)));
    std::memcpy(copy.data() + 20, &check, 4);
    auto d = DecodeFrameHeader(copy);
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(d.status().message().find("v" + std::to_string(version)), std::string::npos)
        << d.status().message();
    EXPECT_EQ(FrameVersion(copy), version);
  }
  VersionMismatch m{2, 2, "worker w1 speaks v2"};
  auto dm = DecodeVersionMismatch(EncodeVersionMismatch(m));
  ASSERT_TRUE(dm.ok());
  EXPECT_EQ(dm->message, m.message);
  auto hello = DecodeHelloRequest(EncodeHelloRequest({}));
  ASSERT_TRUE(hello.ok());
  EXPECT_EQ(hello->min_version, kMinVersion);
  EXPECT_EQ(hello->max_version, kVersion);
  EXPECT_FALSE(DecodeHelloRequest("").ok());
}

TEST(WireTest, HelloCarriesTheTokenAndTheWorkersAnswer) {
  HelloRequest asked;
  asked.token = "cairn1.abc.def";
  auto hello = DecodeHelloRequest(EncodeHelloRequest(asked));
  ASSERT_TRUE(hello.ok());
  EXPECT_EQ(hello->token, asked.token);
  asked.token.assign(kMaxHelloToken + 1, 'x');
  EXPECT_EQ(DecodeHelloRequest(EncodeHelloRequest(asked)).status().code(), StatusCode::kCorruption);
  std::string encoded = EncodeHelloRequest({});
  for (size_t n = 0; n < encoded.size(); ++n) {
    EXPECT_FALSE(DecodeHelloRequest(std::string_view(encoded).substr(0, n)).ok()) << n;
  }

  HelloReply reply;
  reply.principal = "team-a";
  reply.page_size = 1 << 20;
  reply.worker_id = "w1";
  reply.cache_dirs = {"/a", "/b"};
  auto got = DecodeHelloReply(EncodeHelloReply(reply));
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->status, StatusCode::kOk);
  EXPECT_EQ(got->principal, "team-a");
  EXPECT_EQ(got->cache_dirs, reply.cache_dirs);
  HelloReply refused;
  refused.status = StatusCode::kPermissionDenied;
  refused.error_message = "token expired";
  got = DecodeHelloReply(EncodeHelloReply(refused));
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->status, StatusCode::kPermissionDenied);
  EXPECT_EQ(got->error_message, "token expired");
  std::string bad = EncodeHelloReply(refused);
  bad[0] = static_cast<char>(200);
  EXPECT_EQ(DecodeHelloReply(bad).status().code(), StatusCode::kCorruption);
}

PageRef APage() {
  PageRef p;
  p.page_size = 1 << 20;
  p.page_index = 3;
  p.object_size = 5u << 20;
  p.mount = "/bucket a";
  p.key = "dir/ünï code.bin";
  p.version = "\"etag\"";
  return p;
}

// Every request type: round trip, its own message type, and any truncation is Corruption.
TEST(WireTest, EveryRequestRoundTripsAndTruncationsAreRejected) {
  ReadPageRequest read;
  read.deadline_ms = 500;
  read.page = APage();
  read.offset = 4096;
  read.length = 4096;
  read.refetch = true;
  LookupPageRequest lookup;
  lookup.page = APage();
  lookup.offset = 0;
  lookup.length = 1;
  CopyFromPeerRequest copy;
  copy.page = APage();
  copy.peer = "worker-2";
  RequestBase base;
  base.deadline_ms = 120000;
  base.page = APage();
  std::vector<Request> requests = {read,
                                   lookup,
                                   PeerReadRequest{base},
                                   LoadPageRequest{base},
                                   copy,
                                   ProbePageRequest{base},
                                   DropPageRequest{base}};
  std::set<MessageType> types;
  for (const Request& q : requests) {
    MessageType type = TypeOf(q);
    types.insert(type);
    std::string bytes = EncodeRequest(q);
    auto d = DecodeRequest(type, bytes);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    ASSERT_EQ(d->index(), q.index());
    EXPECT_EQ(BaseOf(*d).page.key, APage().key);
    EXPECT_EQ(BaseOf(*d).page.mount, APage().mount);
    EXPECT_EQ(BaseOf(*d).page.page_index, 3u);
    EXPECT_EQ(BaseOf(*d).deadline_ms, BaseOf(q).deadline_ms);
    EXPECT_EQ(EncodeRequest(*d), bytes);
    for (size_t cut = 0; cut < bytes.size(); ++cut) {
      auto t = DecodeRequest(type, std::string_view(bytes).substr(0, cut));
      ASSERT_FALSE(t.ok());
      EXPECT_EQ(t.status().code(), StatusCode::kCorruption);
    }
    EXPECT_EQ(DecodeRequest(type, bytes + "x").status().code(), StatusCode::kCorruption);
  }
  EXPECT_EQ(types.size(), requests.size());
  auto d = DecodeRequest(MessageType::kReadPage, EncodeRequest(read));
  EXPECT_TRUE(std::get<ReadPageRequest>(*d).refetch);
  EXPECT_FALSE(std::get<ReadPageRequest>(*d).no_cache);
  EXPECT_EQ(
      std::get<CopyFromPeerRequest>(*DecodeRequest(MessageType::kCopyFromPeer, EncodeRequest(copy)))
          .peer,
      "worker-2");
  // Replies and pings are not requests.
  EXPECT_EQ(DecodeRequest(MessageType::kPageReply, EncodeRequest(read)).status().code(),
            StatusCode::kCorruption);
}

TEST(WireTest, RequestsThatMakeNoSenseAreInvalidArguments) {
  auto invalid = [](const Request& q) {
    return DecodeRequest(TypeOf(q), EncodeRequest(q)).status().code() ==
           StatusCode::kInvalidArgument;
  };
  ReadPageRequest read;
  read.page = APage();
  read.length = 1;
  read.page.page_index = 5;  // Past the end of a 5 MiB object.
  EXPECT_TRUE(invalid(read));
  read.page.page_index = 0;
  read.page.page_size = 1000;  // Not a multiple of the checksum chunk.
  EXPECT_TRUE(invalid(read));
  read.page = APage();
  read.length = 0;
  EXPECT_TRUE(invalid(read));
  read.length = 1;
  read.offset = (1 << 20);  // Outside the page.
  EXPECT_TRUE(invalid(read));
  read.offset = 0;
  read.page.key = "";
  EXPECT_TRUE(invalid(read));
  CopyFromPeerRequest copy;
  copy.page = APage();
  EXPECT_TRUE(invalid(copy));  // No peer.
  copy.peer = "w";
  EXPECT_FALSE(invalid(copy));
  LookupPageRequest lookup;
  lookup.page = APage();
  lookup.page.object_size = 3u << 20;  // The last page is index 2.
  lookup.length = 1;
  EXPECT_TRUE(invalid(lookup));
}

TEST(WireTest, UnknownReadOptionsAreRejected) {
  ReadPageRequest read;
  read.page = APage();
  read.length = 1;
  std::string bytes = EncodeRequest(read);
  bytes.back() = static_cast<char>(0x80);
  EXPECT_EQ(DecodeRequest(MessageType::kReadPage, bytes).status().code(), StatusCode::kCorruption);
}

TEST(WireTest, PageRepliesRoundTrip) {
  PageReplyMeta r;
  r.source = PageSource::kPeer;
  r.data_offset = 65536;
  r.data_length = kChecksumChunkSize * 2 + 10;
  r.checksums = {1, 2, 3};
  std::string data(r.data_length, 'd');
  std::string payload = EncodePageReplyMeta(r) + data;
  std::span<const char> view;
  auto d = DecodePageReply(payload, &view);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->source, PageSource::kPeer);
  EXPECT_EQ(d->data_offset, 65536u);
  EXPECT_EQ(d->checksums, r.checksums);
  EXPECT_EQ(std::string(view.begin(), view.end()), data);
  // The data length must agree with the metadata.
  EXPECT_FALSE(DecodePageReply(payload + "x", &view).ok());
  EXPECT_FALSE(DecodePageReply(payload.substr(0, payload.size() - 1), &view).ok());
  for (size_t cut = 0; cut < payload.size() - data.size(); ++cut) {
    EXPECT_FALSE(DecodePageReply(payload.substr(0, cut), &view).ok()) << cut;
  }
  r.checksums = {1, 2};  // Does not cover the data.
  EXPECT_FALSE(DecodePageReply(EncodePageReplyMeta(r) + data, &view).ok());

  PageReplyMeta e;
  e.status = StatusCode::kFailedPrecondition;
  e.error_message = "object changed";
  auto de = DecodePageReply(EncodePageReplyMeta(e), &view);
  ASSERT_TRUE(de.ok());
  EXPECT_EQ(de->status, StatusCode::kFailedPrecondition);
  EXPECT_EQ(de->error_message, "object changed");

  std::string prefix = EncodePageReplyMeta(e).substr(0, kPageReplyPrefixSize);
  std::array<char, kPageReplyPrefixSize> p;
  std::memcpy(p.data(), prefix.data(), p.size());
  EXPECT_FALSE(DecodePageReplyMetaLength(p, kPageReplyPrefixSize).ok());  // Longer than payload.
}

TEST(WireTest, ControlRepliesRoundTrip) {
  ControlReply c;
  c.source = PageSource::kUnderStorage;
  auto d = DecodeControlReply(EncodeControlReply(c));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->status, StatusCode::kOk);
  EXPECT_EQ(d->source, PageSource::kUnderStorage);
  c.status = StatusCode::kResourceExhausted;
  c.error_message = "full of pinned pages";
  d = DecodeControlReply(EncodeControlReply(c));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->error_message, c.error_message);
  EXPECT_FALSE(DecodeControlReply(EncodeControlReply(c) + "x").ok());
  EXPECT_FALSE(DecodeControlReply("\x01").ok());
}

TEST(WireTest, MetadataRequestsRoundTripAndTruncationsAreRejected) {
  ListDirRequest list;
  list.deadline_ms = 250;
  list.path = "/lake/dir";
  list.token = "opaque-token";
  list.max_entries = 17;
  StatPathRequest stat;
  stat.path = "/lake/dir/file.bin";
  ListPendingRequest pending;
  pending.deadline_ms = 900;
  pending.path = "/lake/ckpt";
  EXPECT_EQ(TypeOf(MetadataRequest(pending)), MessageType::kListPending);
  for (const MetadataRequest& request :
       {MetadataRequest(list), MetadataRequest(stat), MetadataRequest(pending)}) {
    std::string encoded = EncodeMetadataRequest(request);
    EXPECT_TRUE(IsMetadataRequest(TypeOf(request)));
    auto got = DecodeMetadataRequest(TypeOf(request), encoded);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(PathOf(*got), PathOf(request));
    EXPECT_EQ(EncodeMetadataRequest(*got), encoded);
    for (size_t n = 0; n < encoded.size(); ++n) {
      EXPECT_EQ(DecodeMetadataRequest(TypeOf(request), std::string_view(encoded).substr(0, n))
                    .status()
                    .code(),
                StatusCode::kCorruption)
          << n;
    }
    EXPECT_EQ(DecodeMetadataRequest(TypeOf(request), encoded + "x").status().code(),
              StatusCode::kCorruption);
  }
  EXPECT_EQ(DecodeMetadataRequest(MessageType::kListPending,
                                  EncodeMetadataRequest(ListPendingRequest{0, "lake"}))
                .status()
                .code(),
            StatusCode::kInvalidArgument);  // A relative path.
  EXPECT_FALSE(IsMetadataRequest(MessageType::kReadPage));
  EXPECT_EQ(DecodeMetadataRequest(MessageType::kReadPage, "").status().code(),
            StatusCode::kCorruption);
}

TEST(WireTest, MetadataRequestsThatMakeNoSenseAreInvalidArguments) {
  auto code = [](MetadataRequest request) {
    return DecodeMetadataRequest(TypeOf(request), EncodeMetadataRequest(request)).status().code();
  };
  EXPECT_EQ(code(StatPathRequest{0, "relative/path"}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(StatPathRequest{0, ""}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(StatPathRequest{0, std::string("/a\0b", 4)}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(StatPathRequest{0, "/" + std::string(kMaxMetadataPath, 'a')}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(ListDirRequest{0, "/a", "", 0}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(ListDirRequest{0, "/a", "", kMaxListEntries + 1}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(ListDirRequest{0, "/a", std::string(kMaxListToken + 1, 't'), 10}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(ListDirRequest{0, "/a", "", kMaxListEntries}), StatusCode::kOk);
}

TEST(WireTest, MetadataRepliesRoundTripAndBadEntriesAreCorruption) {
  MetadataReply reply;
  reply.next_token = "next";
  reply.entries = {{"a.bin", false, 123, "etag-1", -5}, {"sub", true, 0, "", 0}};
  std::string encoded = EncodeMetadataReply(reply);
  auto got = DecodeMetadataReply(encoded);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->entries, reply.entries);
  EXPECT_EQ(got->next_token, "next");
  for (size_t n = 0; n < encoded.size(); ++n) {
    EXPECT_EQ(DecodeMetadataReply(std::string_view(encoded).substr(0, n)).status().code(),
              StatusCode::kCorruption)
        << n;
  }
  EXPECT_FALSE(DecodeMetadataReply(encoded + "x").ok());

  MetadataReply error;
  error.status = StatusCode::kPermissionDenied;
  error.error_message = "no read grant";
  auto denied = DecodeMetadataReply(EncodeMetadataReply(error));
  ASSERT_TRUE(denied.ok());
  EXPECT_EQ(denied->status, StatusCode::kPermissionDenied);
  EXPECT_EQ(denied->error_message, "no read grant");

  for (std::string bad :
       {std::string("a/b"), std::string("x\0y", 3), std::string(".."), std::string(".")}) {
    MetadataReply evil;
    evil.entries = {{bad, false, 1, "v", 0}};
    EXPECT_EQ(DecodeMetadataReply(EncodeMetadataReply(evil)).status().code(),
              StatusCode::kCorruption)
        << bad;
  }
  MetadataReply many;
  many.entries.resize(kMaxListEntries + 1, DirEntry{"n", false, 0, "", 0});
  EXPECT_EQ(DecodeMetadataReply(EncodeMetadataReply(many)).status().code(),
            StatusCode::kCorruption);
}

// The whole payload of a write request as it goes on the wire (a WritePage's data follows the
// encoded bytes).
std::string WritePayload(const WriteRequest& request) {
  std::string bytes = EncodeWriteRequest(request);
  if (const auto* page = std::get_if<WritePageRequest>(&request)) {
    bytes.append(page->data.data(), page->data.size());
  }
  return bytes;
}

StatusCode WriteCode(const WriteRequest& request) {
  return DecodeWriteRequest(TypeOf(request), WritePayload(request)).status().code();
}

// A WritePage of `data` with the checksums it needs.
WritePageRequest PageWrite(std::span<const char> data, uint64_t offset = 0) {
  WritePageRequest q;
  q.handle = 0x0123456789abcdefull;
  q.offset = offset;
  q.data = data;
  q.checksums = ChunkChecksums(data);
  return q;
}

// Every write request: round trip of every field, its own message type, and any truncation
// of its payload (a WritePage's data included) or a trailing byte is Corruption.
TEST(WireTest, EveryWriteRequestRoundTripsAndTruncationsAreRejected) {
  std::string data(2 * kChecksumChunkSize + 10, 'w');
  data[5] = 'x';
  OpenWriteRequest open_write{700, "/lake/dir/ckpt.bin", true, true, true, WriteMode::kBack};
  WritePageRequest page = PageWrite(data, 5u << 20);
  TruncateWriteRequest truncate_write{800, 42, kMaxWriteOffset};
  SyncWriteRequest sync_write{900, 43};
  CloseWriteRequest close_write{1000, 44};
  AbortWriteRequest abort_write{1100, UINT64_MAX};
  RemovePathRequest remove_path{1200, "/lake/dir", true};
  MakeDirRequest make_dir{1300, "/lake/run/ckpt"};
  RenameRequest rename{1400, "/lake/run/.tmp-1", "/lake/run/step-1", true};
  HandOverRequest hand_over{1500, "/lake/run/.tmp-2", "/lake/run/step-2", true};
  KeepWriteRequest keep_write{1600, 45};
  std::vector<WriteRequest> requests = {open_write,  page,        truncate_write, sync_write,
                                        close_write, abort_write, remove_path,    make_dir,
                                        rename,      hand_over,   keep_write};
  std::set<MessageType> types;
  for (const WriteRequest& q : requests) {
    MessageType type = TypeOf(q);
    types.insert(type);
    EXPECT_TRUE(IsWriteRequest(type));
    EXPECT_FALSE(IsMetadataRequest(type));
    std::string bytes = WritePayload(q);
    auto d = DecodeWriteRequest(type, bytes);
    ASSERT_TRUE(d.ok()) << static_cast<int>(type) << ": " << d.status().ToString();
    ASSERT_EQ(d->index(), q.index());
    EXPECT_EQ(HandleOf(*d), HandleOf(q));
    EXPECT_EQ(DeadlineOf(*d), DeadlineOf(q));
    EXPECT_EQ(WritePayload(*d), bytes);
    for (size_t cut = 0; cut < bytes.size(); ++cut) {
      auto t = DecodeWriteRequest(type, std::string_view(bytes).substr(0, cut));
      ASSERT_FALSE(t.ok()) << static_cast<int>(type) << " cut at " << cut;
      EXPECT_EQ(t.status().code(), StatusCode::kCorruption) << static_cast<int>(type) << " " << cut;
    }
    EXPECT_EQ(DecodeWriteRequest(type, bytes + "x").status().code(), StatusCode::kCorruption);
  }
  EXPECT_EQ(types.size(), requests.size());

  auto o = std::get<OpenWriteRequest>(
      *DecodeWriteRequest(MessageType::kOpenWrite, EncodeWriteRequest(open_write)));
  EXPECT_EQ(o.deadline_ms, 700u);
  EXPECT_EQ(o.path, open_write.path);
  EXPECT_TRUE(o.create && o.exclusive && o.truncate);
  EXPECT_EQ(o.mode, WriteMode::kBack);
  o = std::get<OpenWriteRequest>(*DecodeWriteRequest(
      MessageType::kOpenWrite, EncodeWriteRequest(OpenWriteRequest{0, "/a", false, false, true})));
  EXPECT_FALSE(o.create || o.exclusive);
  EXPECT_TRUE(o.truncate);
  EXPECT_FALSE(o.seen_absent);
  EXPECT_EQ(o.mode, WriteMode::kThrough);
  o = std::get<OpenWriteRequest>(*DecodeWriteRequest(
      MessageType::kOpenWrite,
      EncodeWriteRequest(OpenWriteRequest{0, "/a", true, false, true, WriteMode::kBack, true})));
  EXPECT_TRUE(o.create && o.truncate && o.seen_absent);
  EXPECT_FALSE(o.exclusive);
  EXPECT_EQ(o.mode, WriteMode::kBack);

  std::string page_bytes = WritePayload(page);
  auto p = std::get<WritePageRequest>(*DecodeWriteRequest(MessageType::kWritePage, page_bytes));
  EXPECT_EQ(p.handle, page.handle);
  EXPECT_EQ(p.offset, 5u << 20);
  EXPECT_EQ(p.checksums, page.checksums);
  EXPECT_EQ(p.checksums.size(), 3u);
  // The data is a view of the payload, not a copy.
  EXPECT_EQ(p.data.data(), page_bytes.data() + page_bytes.size() - data.size());
  EXPECT_EQ(std::string(p.data.begin(), p.data.end()), data);
  // Only the bytes before the data are encoded.
  EXPECT_EQ(EncodeWriteRequest(page).size(), 8 + 8 + 4 + 4 + 3 * 8u);

  auto t = std::get<TruncateWriteRequest>(
      *DecodeWriteRequest(MessageType::kTruncateWrite, EncodeWriteRequest(truncate_write)));
  EXPECT_EQ(t.size, kMaxWriteOffset);
  auto r = std::get<RemovePathRequest>(
      *DecodeWriteRequest(MessageType::kRemovePath, EncodeWriteRequest(remove_path)));
  EXPECT_EQ(r.path, "/lake/dir");
  EXPECT_TRUE(r.directory);
  remove_path.directory = false;
  r = std::get<RemovePathRequest>(
      *DecodeWriteRequest(MessageType::kRemovePath, EncodeWriteRequest(remove_path)));
  EXPECT_FALSE(r.directory);
  auto m = std::get<MakeDirRequest>(
      *DecodeWriteRequest(MessageType::kMakeDir, EncodeWriteRequest(make_dir)));
  EXPECT_EQ(m.path, "/lake/run/ckpt");
  EXPECT_EQ(m.deadline_ms, 1300u);
  auto n = std::get<RenameRequest>(
      *DecodeWriteRequest(MessageType::kRename, EncodeWriteRequest(rename)));
  EXPECT_EQ(n.from, rename.from);
  EXPECT_EQ(n.to, rename.to);
  EXPECT_TRUE(n.no_replace);
  rename.no_replace = false;
  EXPECT_FALSE(
      std::get<RenameRequest>(*DecodeWriteRequest(MessageType::kRename, EncodeWriteRequest(rename)))
          .no_replace);

  auto h = std::get<HandOverRequest>(
      *DecodeWriteRequest(MessageType::kHandOver, EncodeWriteRequest(hand_over)));
  EXPECT_EQ(h.from, hand_over.from);
  EXPECT_EQ(h.to, hand_over.to);
  EXPECT_EQ(h.deadline_ms, 1500u);
  EXPECT_TRUE(h.no_replace);
  hand_over.no_replace = false;
  EXPECT_FALSE(std::get<HandOverRequest>(
                   *DecodeWriteRequest(MessageType::kHandOver, EncodeWriteRequest(hand_over)))
                   .no_replace);

  SyncPathRequest sync_path{60000, "/lake/run"};
  auto sp = std::get<SyncPathRequest>(
      *DecodeWriteRequest(MessageType::kSyncPath, EncodeWriteRequest(sync_path)));
  EXPECT_EQ(sp.path, "/lake/run");
  EXPECT_EQ(sp.deadline_ms, 60000u);
  EXPECT_EQ(TypeOf(sync_path), MessageType::kSyncPath);
  EXPECT_EQ(HandleOf(sync_path), 0u);

  EXPECT_EQ(HandleOf(open_write), 0u);
  EXPECT_EQ(HandleOf(rename), 0u);
  EXPECT_EQ(HandleOf(remove_path), 0u);
  EXPECT_EQ(HandleOf(abort_write), UINT64_MAX);
  EXPECT_EQ(DeadlineOf(page), 0u);
  EXPECT_EQ(DeadlineOf(close_write), 1000u);
}

TEST(WireTest, OnlyWriteTypesAreWriteRequests) {
  std::string bytes = EncodeWriteRequest(SyncWriteRequest{0, 1});
  for (int t = 0; t <= 30; ++t) {
    auto type = static_cast<MessageType>(t);
    bool write = t == 15 || (t >= 19 && t <= 29 && t != 20);
    EXPECT_EQ(IsWriteRequest(type), write) << t;
    if (!write) {
      EXPECT_EQ(DecodeWriteRequest(type, bytes).status().code(), StatusCode::kCorruption) << t;
    }
  }
  // Nor are write requests page or metadata requests.
  EXPECT_EQ(DecodeRequest(MessageType::kSyncWrite, bytes).status().code(), StatusCode::kCorruption);
  EXPECT_EQ(DecodeMetadataRequest(MessageType::kRemovePath, bytes).status().code(),
            StatusCode::kCorruption);
}

TEST(WireTest, WritePagesThatMakeNoSenseAreInvalidArguments) {
  std::string one(1, 'a');
  std::string max(kMaxWriteData, 'm');
  std::string too_long(kMaxWriteData + 1, 'l');
  EXPECT_EQ(WriteCode(PageWrite(one)), StatusCode::kOk);
  EXPECT_EQ(WriteCode(PageWrite(max)), StatusCode::kOk);
  EXPECT_EQ(WriteCode(PageWrite(too_long)), StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteCode(PageWrite({})), StatusCode::kInvalidArgument);  // Empty write.
  WritePageRequest no_handle = PageWrite(one);
  no_handle.handle = 0;
  EXPECT_EQ(WriteCode(no_handle), StatusCode::kInvalidArgument);

  // The end of a write may reach kMaxWriteOffset, not pass it, and never wraps around.
  EXPECT_EQ(WriteCode(PageWrite(one, kMaxWriteOffset - 1)), StatusCode::kOk);
  EXPECT_EQ(WriteCode(PageWrite(max, kMaxWriteOffset - kMaxWriteData)), StatusCode::kOk);
  EXPECT_EQ(WriteCode(PageWrite(one, kMaxWriteOffset)), StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteCode(PageWrite(max, kMaxWriteOffset - kMaxWriteData + 1)),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteCode(PageWrite(one, UINT64_MAX)), StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteCode(PageWrite(max, UINT64_MAX - 10)), StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteCode(PageWrite(max, UINT64_MAX - kMaxWriteData + 1)),
            StatusCode::kInvalidArgument);

  // Checksums are the worker's to verify, not the decoder's.
  WritePageRequest wrong_sums = PageWrite(one);
  wrong_sums.checksums = {12345};
  EXPECT_EQ(WriteCode(wrong_sums), StatusCode::kOk);
}

TEST(WireTest, MalformedWritePagesAreCorruption) {
  std::string data(kChecksumChunkSize * 2 + 1, 'd');
  WritePageRequest page = PageWrite(data);
  auto code = [](std::string_view payload) {
    return DecodeWriteRequest(MessageType::kWritePage, payload).status().code();
  };
  // A checksum count that does not cover the data, either way.
  WritePageRequest few = page;
  few.checksums.pop_back();
  EXPECT_EQ(code(WritePayload(few)), StatusCode::kCorruption);
  WritePageRequest many = page;
  many.checksums.push_back(0);
  EXPECT_EQ(code(WritePayload(many)), StatusCode::kCorruption);
  // An empty write that still names a checksum is malformed, not merely empty.
  WritePageRequest empty = PageWrite({});
  empty.checksums = {0};
  EXPECT_EQ(code(WritePayload(empty)), StatusCode::kCorruption);
  // A data length that disagrees with the bytes sent.
  std::string header = EncodeWriteRequest(page);
  EXPECT_EQ(code(header + data + "x"), StatusCode::kCorruption);
  EXPECT_EQ(code(header + data.substr(1)), StatusCode::kCorruption);
  // A huge length with the matching huge count, and a tiny payload: rejected before any
  // checksum is read or allocated.
  std::string huge(8 + 8, '\x01');
  uint32_t length = UINT32_MAX, count = ChunkCount(UINT32_MAX);
  huge.append(reinterpret_cast<const char*>(&length), 4);
  huge.append(reinterpret_cast<const char*>(&count), 4);
  EXPECT_EQ(code(huge), StatusCode::kCorruption);
  count = UINT32_MAX;
  huge.replace(20, 4, reinterpret_cast<const char*>(&count), 4);
  EXPECT_EQ(code(huge + std::string(64, '\0')), StatusCode::kCorruption);
}

TEST(WireTest, WriteRequestsThatMakeNoSenseAreInvalidArguments) {
  EXPECT_EQ(WriteCode(OpenWriteRequest{0, "/a/b", true, true}), StatusCode::kOk);
  EXPECT_EQ(WriteCode(OpenWriteRequest{0, "/a/b", false, true}), StatusCode::kInvalidArgument);
  OpenWriteRequest bad_mode{0, "/a/b", true};
  bad_mode.mode = static_cast<WriteMode>(2);
  EXPECT_EQ(WriteCode(bad_mode), StatusCode::kInvalidArgument);
  bad_mode.mode = static_cast<WriteMode>(255);
  EXPECT_EQ(WriteCode(bad_mode), StatusCode::kInvalidArgument);
  for (const std::string& path :
       {std::string("relative/path"), std::string(), std::string("/a\0b", 4),
        "/" + std::string(kMaxMetadataPath, 'a')}) {
    EXPECT_EQ(WriteCode(OpenWriteRequest{0, path, true}), StatusCode::kInvalidArgument) << path;
    EXPECT_EQ(WriteCode(RemovePathRequest{0, path, false}), StatusCode::kInvalidArgument) << path;
    EXPECT_EQ(WriteCode(MakeDirRequest{0, path}), StatusCode::kInvalidArgument) << path;
    EXPECT_EQ(WriteCode(SyncPathRequest{0, path}), StatusCode::kInvalidArgument) << path;
    EXPECT_EQ(WriteCode(RenameRequest{0, path, "/a/b"}), StatusCode::kInvalidArgument) << path;
    EXPECT_EQ(WriteCode(RenameRequest{0, "/a/b", path}), StatusCode::kInvalidArgument) << path;
    EXPECT_EQ(WriteCode(HandOverRequest{0, path, "/a/b"}), StatusCode::kInvalidArgument) << path;
    EXPECT_EQ(WriteCode(HandOverRequest{0, "/a/b", path}), StatusCode::kInvalidArgument) << path;
  }
  EXPECT_EQ(WriteCode(HandOverRequest{0, "/a/b", "/a/c"}), StatusCode::kOk);
  EXPECT_EQ(WriteCode(RenameRequest{0, "/a/b", "/a/c"}), StatusCode::kOk);
  EXPECT_EQ(WriteCode(OpenWriteRequest{0, "/" + std::string(kMaxMetadataPath - 1, 'a')}),
            StatusCode::kOk);

  EXPECT_EQ(WriteCode(TruncateWriteRequest{0, 0, 1}), StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteCode(TruncateWriteRequest{0, 1, 0}), StatusCode::kOk);
  EXPECT_EQ(WriteCode(TruncateWriteRequest{0, 1, kMaxWriteOffset + 1}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteCode(TruncateWriteRequest{0, 1, UINT64_MAX}), StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteCode(SyncWriteRequest{0, 0}), StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteCode(CloseWriteRequest{0, 0}), StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteCode(AbortWriteRequest{0, 0}), StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteCode(KeepWriteRequest{0, 0}), StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteCode(AbortWriteRequest{0, 1}), StatusCode::kOk);
}

TEST(WireTest, UnknownWriteFlagsAreCorruption) {
  std::string open = EncodeWriteRequest(OpenWriteRequest{0, "/a", true});
  for (int bit = 4; bit < 8; ++bit) {  // Bit 3 is SEEN_ABSENT (v10).
    std::string bad = open;
    bad[bad.size() - 2] = static_cast<char>(1 | (1 << bit));
    EXPECT_EQ(DecodeWriteRequest(MessageType::kOpenWrite, bad).status().code(),
              StatusCode::kCorruption)
        << bit;
  }
  std::string remove = EncodeWriteRequest(RemovePathRequest{0, "/a", true});
  remove.back() = 2;
  EXPECT_EQ(DecodeWriteRequest(MessageType::kRemovePath, remove).status().code(),
            StatusCode::kCorruption);
  std::string rename = EncodeWriteRequest(RenameRequest{0, "/a", "/b", true});
  rename.back() = 2;
  EXPECT_EQ(DecodeWriteRequest(MessageType::kRename, rename).status().code(),
            StatusCode::kCorruption);
  std::string hand_over = EncodeWriteRequest(HandOverRequest{0, "/a", "/b", true});
  hand_over.back() = 2;
  EXPECT_EQ(DecodeWriteRequest(MessageType::kHandOver, hand_over).status().code(),
            StatusCode::kCorruption);
}

TEST(WireTest, WriteRepliesRoundTrip) {
  WriteReply reply;
  reply.handle = 0xfeedfacecafebeefull;
  reply.size = (1ull << 40) + 3;
  reply.version = "\"etag-7\"";
  reply.mtime_ns = -1234567;  // Before 1970: the sign survives the u64 on the wire.
  reply.idle_timeout_ms = 600'000;
  std::string encoded = EncodeWriteReply(reply);
  auto got = DecodeWriteReply(encoded);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->status, StatusCode::kOk);
  EXPECT_EQ(got->idle_timeout_ms, 600'000u);
  EXPECT_EQ(got->handle, reply.handle);
  EXPECT_EQ(got->size, reply.size);
  EXPECT_EQ(got->version, reply.version);
  EXPECT_EQ(got->mtime_ns, reply.mtime_ns);
  EXPECT_EQ(EncodeWriteReply(*got), encoded);
  for (size_t n = 0; n < encoded.size(); ++n) {
    EXPECT_EQ(DecodeWriteReply(std::string_view(encoded).substr(0, n)).status().code(),
              StatusCode::kCorruption)
        << n;
  }
  EXPECT_EQ(DecodeWriteReply(encoded + "x").status().code(), StatusCode::kCorruption);

  WriteReply error;
  error.status = StatusCode::kAlreadyExists;
  error.error_message = "/lake/a exists";
  error.handle = 9;  // Not sent with an error.
  encoded = EncodeWriteReply(error);
  got = DecodeWriteReply(encoded);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->status, StatusCode::kAlreadyExists);
  EXPECT_EQ(got->error_message, error.error_message);
  EXPECT_EQ(got->handle, 0u);
  for (size_t n = 0; n < encoded.size(); ++n) {
    EXPECT_EQ(DecodeWriteReply(std::string_view(encoded).substr(0, n)).status().code(),
              StatusCode::kCorruption)
        << n;
  }
  EXPECT_EQ(DecodeWriteReply(encoded + "x").status().code(), StatusCode::kCorruption);

  // The reason of an error travels with it (v14); one this build does not know reads as none.
  const Status capped = ResourceExhaustedError("too many files open for writing by team-a")
                            .WithReason(StatusReason::kTooManyOpenFiles);
  got = DecodeWriteReply(EncodeWriteReply(WriteErrorReply(capped)));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(WriteReplyError(*got), capped);
  WriteReply later = WriteErrorReply(capped);
  later.reason = 977;
  got = DecodeWriteReply(EncodeWriteReply(later));
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(WriteReplyError(*got), ResourceExhaustedError(capped.message()));

  // A message longer than a string can hold is cut, not sent garbled.
  error.error_message.assign(70000, 'e');
  got = DecodeWriteReply(EncodeWriteReply(error));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_GT(got->error_message.size(), 0u);
  EXPECT_LT(got->error_message.size(), 65536u);
  EXPECT_EQ(got->error_message, error.error_message.substr(0, got->error_message.size()));

  std::string bad = EncodeWriteReply(reply);
  bad[0] = static_cast<char>(static_cast<int>(StatusCode::kInternal) + 1);
  EXPECT_EQ(DecodeWriteReply(bad).status().code(), StatusCode::kCorruption);
}

// ReadWritten (v9): the request round-trips and is validated; its reply carries the bytes with
// their checksums, and a reply whose bytes do not match them is Corruption.
TEST(WireTest, ReadWrittenRoundTripsAndItsReplyIsChecked) {
  WriteRequest read = ReadWrittenRequest{500, 42, (1ull << 40) + 7, kMaxReadWritten};
  auto got = DecodeWriteRequest(MessageType::kReadWritten, EncodeWriteRequest(read));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const auto& q = std::get<ReadWrittenRequest>(*got);
  EXPECT_EQ(q.deadline_ms, 500u);
  EXPECT_EQ(q.handle, 42u);
  EXPECT_EQ(q.offset, (1ull << 40) + 7);
  EXPECT_EQ(q.length, kMaxReadWritten);
  EXPECT_EQ(TypeOf(read), MessageType::kReadWritten);
  EXPECT_EQ(HandleOf(read), 42u);
  for (const ReadWrittenRequest& bad :
       {ReadWrittenRequest{0, 42, 0, 0}, ReadWrittenRequest{0, 42, 0, kMaxReadWritten + 1},
        ReadWrittenRequest{0, 0, 0, 1}, ReadWrittenRequest{0, 42, kMaxWriteOffset + 1, 1}}) {
    EXPECT_EQ(
        DecodeWriteRequest(MessageType::kReadWritten, EncodeWriteRequest(bad)).status().code(),
        StatusCode::kInvalidArgument);
  }

  WriteReply reply;
  reply.handle = 42;
  reply.size = 10000;
  reply.data.assign(5000, 'w');
  reply.data[4097] = 'x';
  std::string encoded = EncodeWriteReply(reply);
  auto decoded = DecodeWriteReply(encoded);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->data, reply.data);
  EXPECT_EQ(decoded->size, 10000u);
  for (size_t n = 0; n < encoded.size(); n += 97) {
    EXPECT_EQ(DecodeWriteReply(std::string_view(encoded).substr(0, n)).status().code(),
              StatusCode::kCorruption)
        << n;
  }
  std::string damaged = encoded;
  damaged[damaged.size() - 10] ^= 1;  // A byte of the data.
  EXPECT_EQ(DecodeWriteReply(damaged).status().code(), StatusCode::kCorruption);
  EXPECT_LE(EncodeWriteReply(WriteReply{StatusCode::kOk, "", 0, 1, 1, std::string(255, 'v'), 0,
                                        UINT32_MAX, std::string(kMaxReadWritten, 'd')})
                .size(),
            kMaxWriteReplyPayload);
}

TEST(WireTest, AlignedRangeCoversChunks) {
  ByteRange r = AlignedRange(70000, 10, 1 << 20);
  EXPECT_EQ(r.begin, 70000u / kChecksumChunkSize * kChecksumChunkSize);
  EXPECT_EQ(r.end, r.begin + kChecksumChunkSize);
  r = AlignedRange(8190, 4, 1 << 20);  // Straddles two chunks.
  EXPECT_EQ(r.begin, 4096u);
  EXPECT_EQ(r.end, 12288u);
  r = AlignedRange(0, 100, 50);
  EXPECT_EQ(r.begin, 0u);
  EXPECT_EQ(r.end, 50u);
  EXPECT_EQ(PageLength(3u << 20, 2, 1 << 20), 1u << 20);
  EXPECT_EQ(PageLength((3u << 20) + 5, 3, 1 << 20), 5u);
  EXPECT_EQ(PageLength(3u << 20, 3, 1 << 20), 0u);
}

// Regression: page_index * page_size wrapped for huge indexes, so page 2^46 of 256 KiB pages
// (2^46 * 2^18 = 2^64) was page 0 and served page 0's bytes under another key.
TEST(WireTest, HugePageIndexesArePastTheEndInsteadOfWrapping) {
  constexpr uint32_t kPage = 256u << 10;
  EXPECT_EQ(PageLength(10u << 20, uint64_t{1} << 46, kPage), 0u);
  EXPECT_EQ(PageLength(UINT64_MAX, uint64_t{1} << 46, kPage), 0u);
  EXPECT_EQ(PageLength(UINT64_MAX, UINT64_MAX, kPage), 0u);
  EXPECT_EQ(PageLength(UINT64_MAX, UINT64_MAX / kPage, kPage), UINT64_MAX % kPage);
  EXPECT_EQ(PageLength(UINT64_MAX, UINT64_MAX / kPage - 1, kPage), kPage);
  EXPECT_EQ(PageLength(100, 0, 0), 0u);

  ReadPageRequest q;
  q.page.page_size = kPage;
  q.length = 4096;
  q.page.page_index = uint64_t{1} << 46;
  q.page.object_size = 10u << 20;
  q.page.mount = "/m";
  q.page.key = "k";
  q.page.version = "v";
  auto decoded = DecodeRequest(MessageType::kReadPage, EncodeRequest(q));
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cairn::protocol
