#include "device/resource_quantity.h"

#include <limits>
#include <string>

#include "device/text_util.h"

namespace hami::device {

namespace {

using U128 = unsigned __int128;

// Significant digits accepted in the number; keeps mantissa * 2^60 below 2^128.
constexpr int kMaxDigits = 20;
// 10^38 < 2^128.
constexpr int kMaxPow10 = 38;
// Suffix letters: binary multipliers take an 'i' after them; decimal ones stand alone.
constexpr std::string_view kBinaryPrefixes = "KMGTPE";
constexpr std::string_view kDecimalSuffixes = "numkMGTPE";

// Where the number of a quantity ends (after sign, digits and point).
size_t NumberEnd(std::string_view text) {
  size_t end = text.find_first_not_of("+-0123456789.");
  return end == std::string_view::npos ? text.size() : end;
}

U128 Pow10(int n) {
  U128 v = 1;
  for (int i = 0; i < n; ++i) v *= 10;
  return v;
}

// A quantity's number: value = mantissa * 10^decimal_exponent (before its suffix applies).
struct Decimal {
  U128 mantissa = 0;
  int64_t decimal_exponent = 0;
  int digits_seen = 0;
};

// Reads digits and at most one point from text[*i], leaving *i on the first other character.
// Leading zeros and trailing fraction zeros do not count towards kMaxDigits. Returns the reason
// the number is bad, or null.
const char* ReadDecimal(std::string_view text, size_t* i, Decimal* out) {
  U128 mantissa = 0;
  int significant = 0;
  int64_t decimal_exponent = 0;
  int pending_fraction_zeros = 0;  // zeros after the point not yet folded into the mantissa
  int digits_seen = 0;
  bool in_fraction = false;
  for (; *i < text.size(); ++*i) {
    char c = text[*i];
    if (c == '.') {
      if (in_fraction) return "not a quantity";
      in_fraction = true;
      continue;
    }
    if (c < '0' || c > '9') break;
    ++digits_seen;
    unsigned d = static_cast<unsigned>(c - '0');
    if (in_fraction) {
      if (d == 0) {
        ++pending_fraction_zeros;
        continue;
      }
      if (mantissa != 0) significant += pending_fraction_zeros;
      if (++significant > kMaxDigits) return "number has too many digits";
      mantissa = mantissa * Pow10(pending_fraction_zeros + 1) + d;
      decimal_exponent -= pending_fraction_zeros + 1;
      pending_fraction_zeros = 0;
    } else {
      if (mantissa == 0 && d == 0) continue;
      if (++significant > kMaxDigits) return "number has too many digits";
      mantissa = mantissa * 10 + d;
    }
  }
  *out = Decimal{mantissa, decimal_exponent, digits_seen};
  return nullptr;
}

// Folds the suffix (Ki..Ei, n..E, or e<n>) into the exponents. Returns the reason it is bad, or
// null.
const char* ApplySuffix(std::string_view suffix, int* binary_shift, int64_t* decimal_exponent) {
  constexpr const char* kSuffixes =
      "unknown suffix (use Ki Mi Gi Ti Pi Ei, n u m k M G T P E or e<n>)";
  if (suffix.empty()) {
  } else if (suffix.size() == 2 && suffix[1] == 'i' &&
             kBinaryPrefixes.find(suffix[0]) != std::string_view::npos) {
    *binary_shift = 10 * (static_cast<int>(kBinaryPrefixes.find(suffix[0])) + 1);
  } else if (suffix.size() == 1 && kDecimalSuffixes.find(suffix[0]) != std::string_view::npos) {
    static constexpr int kExp[] = {-9, -6, -3, 3, 6, 9, 12, 15, 18};
    *decimal_exponent += kExp[kDecimalSuffixes.find(suffix[0])];
  } else if ((suffix[0] == 'e' || suffix[0] == 'E') && suffix.size() > 1) {
    int64_t exponent = 0;
    if (text::ParseInt(suffix.substr(1), -1000000, 1000000, &exponent) != nullptr) {
      return kSuffixes;
    }
    *decimal_exponent += exponent;
  } else {
    return kSuffixes;
  }
  return nullptr;
}

// *value = mantissa * 2^binary_shift * 10^decimal_exponent, which must be a whole number that
// fits in 128 bits. Returns the reason it is not, or null.
const char* Scale(U128 mantissa, int binary_shift, int64_t decimal_exponent, U128* value) {
  *value = mantissa << binary_shift;  // < 2^67 * 2^60
  if (decimal_exponent > 0) {
    if (decimal_exponent > kMaxPow10) return "too large";
    U128 m = Pow10(static_cast<int>(decimal_exponent));
    if (*value > ~static_cast<U128>(0) / m) return "too large";
    *value *= m;
  } else if (decimal_exponent < 0) {
    // value < 2^127 < 10^39, so a larger divisor can never divide it.
    if (-decimal_exponent > kMaxPow10) return "not a whole number";
    U128 d = Pow10(static_cast<int>(-decimal_exponent));
    if (*value % d != 0) return "not a whole number";
    *value /= d;
  }
  return nullptr;
}

}  // namespace

Result<int64_t> ParseIntegerQuantity(std::string_view text) {
  auto bad = [&](const char* why) { return InvalidArgumentError(text::Quote(text) + ": " + why); };
  size_t i = 0;
  bool negative = false;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
    negative = text[i] == '-';
    ++i;
  }
  Decimal number;
  if (const char* why = ReadDecimal(text, &i, &number)) return bad(why);
  if (number.digits_seen == 0) {
    return bad("not a quantity (expected a number such as 1, 500m or 4Ki)");
  }
  int binary_shift = 0;
  int64_t decimal_exponent = number.decimal_exponent;
  if (const char* why = ApplySuffix(text.substr(i), &binary_shift, &decimal_exponent)) {
    return bad(why);
  }
  if (number.mantissa == 0) return static_cast<int64_t>(0);
  U128 value = 0;
  if (const char* why = Scale(number.mantissa, binary_shift, decimal_exponent, &value)) {
    return bad(why);
  }
  constexpr U128 kInt64Max = static_cast<U128>(std::numeric_limits<int64_t>::max());
  if (value > kInt64Max + (negative ? 1 : 0)) return bad("too large");
  if (negative) {
    if (value == kInt64Max + 1) return std::numeric_limits<int64_t>::min();
    return -static_cast<int64_t>(value);
  }
  return static_cast<int64_t>(value);
}

std::string_view QuantityMultiplier(std::string_view text) {
  const size_t end = NumberEnd(text);
  if (text.substr(0, end).find_first_of("0123456789") == std::string_view::npos) return {};
  std::string_view suffix = text.substr(end);
  const bool binary = suffix.size() == 2 && suffix[1] == 'i' &&
                      kBinaryPrefixes.find(suffix[0]) != std::string_view::npos;
  // k M G T P E: the decimal suffixes that multiply (n u m divide).
  const bool decimal = suffix.size() == 1 && suffix[0] != 'n' && suffix[0] != 'u' &&
                       suffix[0] != 'm' &&
                       kDecimalSuffixes.find(suffix[0]) != std::string_view::npos;
  return binary || decimal ? suffix : std::string_view();
}

}  // namespace hami::device
