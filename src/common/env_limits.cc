#include "common/env_limits.h"

namespace hami {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool EqualsIgnoreCase(const char* a, const char* a_end, const char* b) {
  for (; a < a_end; ++a, ++b) {
    if (*b == '\0' || Lower(*a) != Lower(*b)) return false;
  }
  return *b == '\0';
}

// Sets [*begin, *end) to `text` without leading and trailing whitespace.
void Trim(const char* text, const char** begin, const char** end) {
  const char* p = text;
  while (IsSpace(*p)) ++p;
  const char* e = p;
  while (*e != '\0') ++e;
  while (e > p && IsSpace(e[-1])) --e;
  *begin = p;
  *end = e;
}

// Returns the shift (log2 of the multiplier) for a unit, or -1 if the unit is unknown.
int UnitShift(const char* u, const char* end) {
  if (u == end) return 0;
  static const struct {
    const char* spelling;
    int shift;
  } kUnits[] = {
      {"b", 0},   {"k", 10},   {"ki", 10}, {"kib", 10}, {"kb", 10}, {"m", 20},
      {"mi", 20}, {"mib", 20}, {"mb", 20}, {"g", 30},   {"gi", 30}, {"gib", 30},
      {"gb", 30}, {"t", 40},   {"ti", 40}, {"tib", 40}, {"tb", 40},
  };
  for (const auto& unit : kUnits) {
    if (EqualsIgnoreCase(u, end, unit.spelling)) return unit.shift;
  }
  return -1;
}

}  // namespace

const char* ParseByteSize(const char* text, uint64_t* bytes) {
  if (text == nullptr) return "no value";
  const char *p, *end;
  Trim(text, &p, &end);
  if (p == end) return "empty value";
  if (*p == '-') return "negative sizes are not allowed";
  if (*p == '+') ++p;
  if (p == end || !(IsDigit(*p) || *p == '.')) return "expected a number such as 4096m, 4Gi or 4G";

  uint64_t whole = 0;
  bool any_digit = false;
  for (; p < end && IsDigit(*p); ++p) {
    any_digit = true;
    uint64_t d = static_cast<uint64_t>(*p - '0');
    if (whole > (UINT64_MAX - d) / 10) return "value is too large";
    whole = whole * 10 + d;
  }
  // Fraction: kept as numerator/denominator with up to 9 digits, enough for byte precision at TiB.
  uint64_t frac_num = 0, frac_den = 1;
  if (p < end && *p == '.') {
    ++p;
    for (; p < end && IsDigit(*p); ++p) {
      any_digit = true;
      if (frac_den < 1000000000ULL) {
        frac_num = frac_num * 10 + static_cast<uint64_t>(*p - '0');
        frac_den *= 10;
      }
    }
  }
  if (!any_digit) return "expected a number such as 4096m, 4Gi or 4G";
  int shift = UnitShift(p, end);
  if (shift < 0) return "unknown unit (use bytes, k, m, g, t, Ki, Mi, Gi, Ti)";

  if (shift > 0 && whole > (UINT64_MAX >> shift)) return "value is too large";
  uint64_t value = whole << shift;
  if (frac_num != 0) {
    // frac_num < frac_den <= 1e9 and shift <= 40: frac_num << shift fits in 64 bits only when
    // small; split the multiply to stay exact without 128-bit arithmetic.
    uint64_t unit = 1ULL << shift;
    uint64_t add = (unit / frac_den) * frac_num + ((unit % frac_den) * frac_num) / frac_den;
    if (value > UINT64_MAX - add) return "value is too large";
    value += add;
  }
  *bytes = value;
  return nullptr;
}

const char* ParsePercent(const char* text, int* percent) {
  if (text == nullptr) return "no value";
  const char *p, *end;
  Trim(text, &p, &end);
  if (p < end && end[-1] == '%') --end;
  if (p == end) return "empty value";
  if (*p == '-') return "negative percentages are not allowed";
  int value = 0;
  for (; p < end; ++p) {
    if (!IsDigit(*p)) return "expected an integer percentage between 0 and 100";
    value = value * 10 + (*p - '0');
    if (value > 100) return "percentage must be between 0 and 100";
  }
  *percent = value;
  return nullptr;
}

const char* ParseBool(const char* text, bool* value) {
  if (text == nullptr) return "no value";
  const char *p, *end;
  Trim(text, &p, &end);
  static const char* kTrue[] = {"true", "1", "yes", "on"};
  static const char* kFalse[] = {"false", "0", "no", "off"};
  for (const char* t : kTrue) {
    if (EqualsIgnoreCase(p, end, t)) {
      *value = true;
      return nullptr;
    }
  }
  for (const char* f : kFalse) {
    if (EqualsIgnoreCase(p, end, f)) {
      *value = false;
      return nullptr;
    }
  }
  return "expected true or false";
}

}  // namespace hami
