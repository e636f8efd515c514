#include "device/wire_time.h"

#include <chrono>
#include <cstdio>

#include "device/text_util.h"

namespace hami::device {

namespace {

constexpr int64_t kSecondsPerDay = 86400;

// Reads exactly `n` ASCII digits at text[*pos].
bool ReadDigits(std::string_view text, size_t* pos, int n, int32_t* out) {
  if (*pos + static_cast<size_t>(n) > text.size()) return false;
  int32_t v = 0;
  for (int i = 0; i < n; ++i) {
    char c = text[*pos + static_cast<size_t>(i)];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *pos += static_cast<size_t>(n);
  *out = v;
  return true;
}

bool Expect(std::string_view text, size_t* pos, char c) {
  if (*pos >= text.size() || text[*pos] != c) return false;
  ++*pos;
  return true;
}

// Parses "YYYY-MM-DD?HH:MM:SS" with `sep` between date and time, validating ranges.
bool ParseCivil(std::string_view text, size_t* pos, char sep, CivilTime* t) {
  if (!ReadDigits(text, pos, 4, &t->year) || !Expect(text, pos, '-') ||
      !ReadDigits(text, pos, 2, &t->month) || !Expect(text, pos, '-') ||
      !ReadDigits(text, pos, 2, &t->day) || !Expect(text, pos, sep) ||
      !ReadDigits(text, pos, 2, &t->hour) || !Expect(text, pos, ':') ||
      !ReadDigits(text, pos, 2, &t->minute) || !Expect(text, pos, ':') ||
      !ReadDigits(text, pos, 2, &t->second)) {
    return false;
  }
  return true;
}

Status CheckRanges(const CivilTime& t, std::string_view text) {
  using namespace std::chrono;
  year_month_day ymd{year{t.year}, month{static_cast<unsigned>(t.month)},
                     day{static_cast<unsigned>(t.day)}};
  if (!ymd.ok()) return InvalidArgumentError("no such date in " + text::Quote(text));
  if (t.hour > 23 || t.minute > 59 || t.second > 59) {
    return InvalidArgumentError("time of day out of range in " + text::Quote(text));
  }
  return OkStatus();
}

void Append2(std::string* out, int32_t v) {
  out->push_back(static_cast<char>('0' + v / 10 % 10));
  out->push_back(static_cast<char>('0' + v % 10));
}

void AppendCivil(std::string* out, const CivilTime& t, char sep) {
  char year[16];
  std::snprintf(year, sizeof(year), "%04d", static_cast<int>(t.year));
  out->append(year);
  out->push_back('-');
  Append2(out, t.month);
  out->push_back('-');
  Append2(out, t.day);
  out->push_back(sep);
  Append2(out, t.hour);
  out->push_back(':');
  Append2(out, t.minute);
  out->push_back(':');
  Append2(out, t.second);
}

}  // namespace

int64_t CivilToUnix(const CivilTime& t, int32_t utc_offset_seconds) {
  using namespace std::chrono;
  sys_days days{year_month_day{year{t.year}, month{static_cast<unsigned>(t.month)},
                               day{static_cast<unsigned>(t.day)}}};
  int64_t s = static_cast<int64_t>(days.time_since_epoch().count()) * kSecondsPerDay +
              t.hour * 3600 + t.minute * 60 + t.second;
  return s - utc_offset_seconds;
}

CivilTime UnixToCivil(int64_t unix_seconds, int32_t utc_offset_seconds) {
  using namespace std::chrono;
  int64_t local = unix_seconds + utc_offset_seconds;
  int64_t days = local / kSecondsPerDay;
  int64_t rem = local % kSecondsPerDay;
  if (rem < 0) {
    rem += kSecondsPerDay;
    --days;
  }
  year_month_day ymd{sys_days{std::chrono::days{days}}};
  CivilTime t;
  t.year = static_cast<int>(ymd.year());
  t.month = static_cast<int32_t>(static_cast<unsigned>(ymd.month()));
  t.day = static_cast<int32_t>(static_cast<unsigned>(ymd.day()));
  t.hour = static_cast<int32_t>(rem / 3600);
  t.minute = static_cast<int32_t>(rem / 60 % 60);
  t.second = static_cast<int32_t>(rem % 60);
  return t;
}

std::string FormatDateTime(const CivilTime& t) {
  std::string out;
  AppendCivil(&out, t, ' ');
  return out;
}

Result<CivilTime> ParseDateTime(std::string_view text) {
  CivilTime t;
  size_t pos = 0;
  if (!ParseCivil(text, &pos, ' ', &t) || pos != text.size()) {
    return InvalidArgumentError("expected a time like \"2006-01-02 15:04:05\", got " +
                                text::Quote(text));
  }
  HAMI_RETURN_IF_ERROR(CheckRanges(t, text));
  return t;
}

std::string FormatRfc3339(const Timestamp& t) {
  std::string out;
  AppendCivil(&out, UnixToCivil(t.unix_seconds, t.utc_offset_seconds), 'T');
  int32_t minutes = t.utc_offset_seconds / 60;
  if (minutes == 0) {
    out.push_back('Z');
  } else {
    out.push_back(minutes < 0 ? '-' : '+');
    if (minutes < 0) minutes = -minutes;
    Append2(&out, minutes / 60);
    out.push_back(':');
    Append2(&out, minutes % 60);
  }
  return out;
}

Result<Timestamp> ParseRfc3339(std::string_view text) {
  auto bad = [&] {
    return InvalidArgumentError("expected an RFC 3339 time like \"2006-01-02T15:04:05Z\", got " +
                                text::Quote(text));
  };
  CivilTime civil;
  size_t pos = 0;
  if (!ParseCivil(text, &pos, 'T', &civil)) return bad();
  HAMI_RETURN_IF_ERROR(CheckRanges(civil, text));
  Timestamp ts;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    int digits = 0;
    int32_t nanos = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      if (digits < 9) nanos = nanos * 10 + (text[pos] - '0');
      ++digits;
      ++pos;
    }
    if (digits == 0 || digits > 9) return bad();
    for (int i = digits; i < 9; ++i) nanos *= 10;
    ts.nanos = nanos;
  }
  if (pos >= text.size()) return bad();
  if (text[pos] == 'Z') {
    ++pos;
  } else if (text[pos] == '+' || text[pos] == '-') {
    bool negative = text[pos] == '-';
    ++pos;
    int32_t hh = 0, mm = 0;
    if (!ReadDigits(text, &pos, 2, &hh) || !Expect(text, &pos, ':') ||
        !ReadDigits(text, &pos, 2, &mm) || hh > 23 || mm > 59) {
      return bad();
    }
    ts.utc_offset_seconds = (hh * 3600 + mm * 60) * (negative ? -1 : 1);
  } else {
    return bad();
  }
  if (pos != text.size()) return bad();
  ts.unix_seconds = CivilToUnix(civil, ts.utc_offset_seconds);
  return ts;
}

}  // namespace hami::device
