#include "ufs/s3_xml.h"

#include <cctype>
#include <charconv>
#include <cstdio>
#include <limits>
#include <pugixml.hpp>
#include <sstream>

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

// Days from 1970-01-01 to year-month-day in the proleptic Gregorian calendar (H. Hinnant's
// days_from_civil); exact for every year this file accepts, with no time_t or timegm involved.
int64_t DaysFromCivil(int64_t year, int64_t month, int64_t day) {
  year -= month <= 2 ? 1 : 0;
  const int64_t era = year / 400;  // year >= 1969 here, so no negative rounding.
  const int64_t year_of_era = year - era * 400;
  const int64_t day_of_year = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1;
  const int64_t day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
  return era * 146097 + day_of_era - 719468;
}

int DaysInMonth(int year, int month) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  return month == 2 && leap ? 29 : kDays[month - 1];
}

// Every field is range-checked before any arithmetic: the result must fit int64 nanoseconds
// (1970 to 2262-04-11T23:47:16.854775807Z), and a date a server or a fuzzer sends from outside
// that span is an error, not an overflow.
StatusOr<int64_t> ToEpochNanos(int year, int month, int day, int hour, int minute, int second,
                               int64_t nanos, std::string_view text) {
  // The year bound keeps DaysFromCivil small; the exact limit is checked below.
  if (year < 1970 || year > 2262 || month < 1 || month > 12 || day < 1 ||
      day > DaysInMonth(year, month) || hour < 0 || hour > 23 || minute < 0 || minute > 59 ||
      second < 0 || second > 60 || nanos < 0 || nanos >= kNanosPerSecond) {
    return InvalidArgumentError("date out of range: '" + std::string(text) + "'");
  }
  // second == 60 (a leap second) counts as the first second of the next minute, as timegm does.
  const int64_t seconds =
      DaysFromCivil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second;
  if (seconds > (std::numeric_limits<int64_t>::max() - nanos) / kNanosPerSecond) {
    return InvalidArgumentError("date out of range: '" + std::string(text) + "'");
  }
  return seconds * kNanosPerSecond + nanos;
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

StatusOr<std::string> ParseInitiateMultipartUpload(std::string_view xml) {
  pugi::xml_document doc;
  pugi::xml_parse_result parsed = doc.load_buffer(xml.data(), xml.size());
  if (!parsed) {
    return InvalidArgumentError(std::string("malformed InitiateMultipartUpload response: ") +
                                parsed.description());
  }
  pugi::xml_node root = doc.child("InitiateMultipartUploadResult");
  if (!root) {
    return InvalidArgumentError(
        "InitiateMultipartUpload response has no "
        "InitiateMultipartUploadResult");
  }
  std::string id = ChildText(root, "UploadId");
  if (id.empty() || id.size() > 1024) {
    return InvalidArgumentError("InitiateMultipartUpload returned an UploadId of " +
                                std::to_string(id.size()) + " bytes");
  }
  for (char c : id) {
    if (c < 0x21 || c > 0x7e) {
      return InvalidArgumentError(
          "InitiateMultipartUpload returned an UploadId with a byte "
          "outside printable ASCII");
    }
  }
  return id;
}

namespace {

// The ETag and LastModified of a 200 answer whose root element is `root_name` (or an <Error>,
// returned in `error`).
struct ResultFields {
  std::string etag;
  std::string last_modified;
};
StatusOr<ResultFields> ParseResult(std::string_view xml, const char* root_name, const char* op,
                                   S3ErrorBody* error) {
  pugi::xml_document doc;
  pugi::xml_parse_result parsed = doc.load_buffer(xml.data(), xml.size());
  if (!parsed) {
    return InvalidArgumentError(std::string("malformed ") + op +
                                " response: " + parsed.description());
  }
  if (doc.child("Error")) {
    *error = ParseS3Error(xml);
    return InvalidArgumentError(std::string(op) + " failed: " + error->code);
  }
  pugi::xml_node root = doc.child(root_name);
  if (!root) return InvalidArgumentError(std::string(op) + " response has no " + root_name);
  ResultFields fields{StripETagQuotes(ChildText(root, "ETag")), ChildText(root, "LastModified")};
  if (fields.etag.empty()) return InvalidArgumentError(std::string(op) + " returned no ETag");
  return fields;
}

}  // namespace

StatusOr<std::string> ParseCompleteMultipartUpload(std::string_view xml, S3ErrorBody* error) {
  CAIRN_ASSIGN_OR_RETURN(ResultFields fields, ParseResult(xml, "CompleteMultipartUploadResult",
                                                          "CompleteMultipartUpload", error));
  return std::move(fields.etag);
}

StatusOr<CopyResult> ParseCopyResult(std::string_view xml, bool part, S3ErrorBody* error) {
  CAIRN_ASSIGN_OR_RETURN(ResultFields fields,
                         ParseResult(xml, part ? "CopyPartResult" : "CopyObjectResult",
                                     part ? "UploadPartCopy" : "CopyObject", error));
  CopyResult result;
  result.etag = std::move(fields.etag);
  StatusOr<int64_t> mtime = ParseIso8601(fields.last_modified);
  if (mtime.ok()) result.mtime_ns = *mtime;
  return result;
}

std::string BuildCompleteMultipartUpload(const std::vector<CompletedPart>& parts) {
  pugi::xml_document doc;
  pugi::xml_node root = doc.append_child("CompleteMultipartUpload");
  root.append_attribute("xmlns") = "http://s3.amazonaws.com/doc/2006-03-01/";
  for (const CompletedPart& part : parts) {
    pugi::xml_node node = root.append_child("Part");
    node.append_child("PartNumber").text().set(part.number);
    node.append_child("ETag").text().set(part.etag.c_str());
  }
  std::ostringstream out;
  doc.save(out, "", pugi::format_raw);
  return out.str();
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
