#include "ufs/s3_xml.h"

#include <cctype>
#include <charconv>
#include <cstdio>
#include <ctime>
#include <pugixml.hpp>

namespace cairn::ufs::s3 {
namespace {

constexpr int64_t kNanosPerSecond = 1'000'000'000;

bool ParseUint64(std::string_view text, uint64_t& out) {
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

// Parses exactly `width` digits at text[pos]; -1 if not digits.
int Digits(std::string_view text, size_t pos, size_t width) {
  if (pos + width > text.size()) return -1;
  int v = 0;
  for (size_t i = pos; i < pos + width; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) return -1;
    v = v * 10 + (text[i] - '0');
  }
  return v;
}

StatusOr<int64_t> ToEpochNanos(int year, int month, int day, int hour, int minute, int second,
                               int64_t nanos, std::string_view text) {
  if (year < 1970 || month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 ||
      second > 60) {
    return InvalidArgumentError("date out of range: '" + std::string(text) + "'");
  }
  struct tm tm = {};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  time_t t = timegm(&tm);
  return static_cast<int64_t>(t) * kNanosPerSecond + nanos;
}

std::string ChildText(const pugi::xml_node& node, const char* name) {
  return node.child(name).text().as_string();
}

}  // namespace

StatusOr<ListObjectsPage> ParseListObjectsV2(std::string_view xml) {
  pugi::xml_document doc;
  pugi::xml_parse_result parsed = doc.load_buffer(xml.data(), xml.size());
  if (!parsed) {
    return InvalidArgumentError(std::string("malformed ListObjectsV2 response: ") +
                                parsed.description());
  }
  pugi::xml_node root = doc.child("ListBucketResult");
  if (!root) return InvalidArgumentError("ListObjectsV2 response has no ListBucketResult");
  ListObjectsPage page;
  page.truncated = std::string_view(ChildText(root, "IsTruncated")) == "true";
  page.next_token = ChildText(root, "NextContinuationToken");
  for (pugi::xml_node c : root.children("Contents")) {
    ObjectInfo info;
    info.key = ChildText(c, "Key");
    std::string size = ChildText(c, "Size");
    if (!ParseUint64(size, info.size)) {
      return InvalidArgumentError("bad Size '" + size + "' for key '" + info.key + "'");
    }
    info.version = StripETagQuotes(ChildText(c, "ETag"));
    std::string modified = ChildText(c, "LastModified");
    if (!modified.empty()) {
      StatusOr<int64_t> ns = ParseIso8601(modified);
      if (!ns.ok()) return ns.status().WithContext("key '" + info.key + "'");
      info.mtime_ns = *ns;
    }
    page.objects.push_back(std::move(info));
  }
  for (pugi::xml_node p : root.children("CommonPrefixes")) {
    page.common_prefixes.push_back(ChildText(p, "Prefix"));
  }
  if (page.truncated && page.next_token.empty()) {
    return InvalidArgumentError(
        "ListObjectsV2 response is truncated but has no continuation "
        "token");
  }
  return page;
}

S3ErrorBody ParseS3Error(std::string_view xml) {
  S3ErrorBody err;
  if (xml.empty()) return err;
  pugi::xml_document doc;
  if (!doc.load_buffer(xml.data(), xml.size())) return err;
  pugi::xml_node root = doc.child("Error");
  if (!root) return err;
  err.code = ChildText(root, "Code");
  err.message = ChildText(root, "Message");
  err.resource = ChildText(root, "Resource");
  err.request_id = ChildText(root, "RequestId");
  return err;
}

StatusOr<int64_t> ParseHttpDate(std::string_view text) {
  // "Wed, 12 Oct 2009 17:50:00 GMT": fixed layout after the day name.
  static constexpr std::string_view kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                 "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  auto bad = [&] { return InvalidArgumentError("bad HTTP date '" + std::string(text) + "'"); };
  size_t comma = text.find(", ");
  if (comma == std::string_view::npos) return bad();
  std::string_view s = text.substr(comma + 2);
  if (s.size() != 24 || s.substr(20) != " GMT") return bad();
  int day = Digits(s, 0, 2);
  std::string_view mon = s.substr(3, 3);
  int year = Digits(s, 7, 4);
  int hour = Digits(s, 12, 2);
  int minute = Digits(s, 15, 2);
  int second = Digits(s, 18, 2);
  int month = 0;
  for (int i = 0; i < 12; ++i) {
    if (kMonths[i] == mon) month = i + 1;
  }
  if (day < 0 || year < 0 || hour < 0 || minute < 0 || second < 0 || month == 0 || s[2] != ' ' ||
      s[6] != ' ' || s[11] != ' ' || s[14] != ':' || s[17] != ':') {
    return bad();
  }
  return ToEpochNanos(year, month, day, hour, minute, second, 0, text);
}

StatusOr<int64_t> ParseIso8601(std::string_view text) {
  auto bad = [&] { return InvalidArgumentError("bad ISO 8601 time '" + std::string(text) + "'"); };
  // "YYYY-MM-DDTHH:MM:SS" then optional ".fff..." then "Z".
  if (text.size() < 20 || text[4] != '-' || text[7] != '-' || text[10] != 'T' || text[13] != ':' ||
      text[16] != ':' || text.back() != 'Z') {
    return bad();
  }
  int year = Digits(text, 0, 4), month = Digits(text, 5, 2), day = Digits(text, 8, 2);
  int hour = Digits(text, 11, 2), minute = Digits(text, 14, 2), second = Digits(text, 17, 2);
  if (year < 0 || month < 0 || day < 0 || hour < 0 || minute < 0 || second < 0) return bad();
  int64_t nanos = 0;
  std::string_view frac = text.substr(19, text.size() - 20);
  if (!frac.empty()) {
    if (frac.front() != '.' || frac.size() < 2) return bad();
    int64_t scale = kNanosPerSecond;
    for (char c : frac.substr(1)) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return bad();
      scale /= 10;
      nanos += (c - '0') * scale;  // Digits past nanoseconds add 0.
    }
  }
  return ToEpochNanos(year, month, day, hour, minute, second, nanos, text);
}

std::string StripETagQuotes(std::string_view etag) {
  if (etag.starts_with("W/")) etag.remove_prefix(2);
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') {
    etag = etag.substr(1, etag.size() - 2);
  }
  return std::string(etag);
}

}  // namespace cairn::ufs::s3
