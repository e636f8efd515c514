#include "common/prom_text.h"

#include <sys/mman.h>

#include <cmath>

namespace hami {

// Appends a label value or HELP text escaped for the text format: backslash, newline and (label
// values only) the double quote.
bool PromNeedsEscaping(std::string_view s) {
  bool plain = true;
  for (char c : s) plain &= c != '\\' && c != '\n' && c != '"';
  return !plain;
}

void AppendPromEscaped(std::string* out, std::string_view s, bool quote) {
  if (!PromNeedsEscaping(s)) {
    out->append(s);
    return;
  }
  for (char c : s) {
    switch (c) {
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '"':
        if (quote) {
          out->append("\\\"");
          break;
        }
        [[fallthrough]];
      default:
        out->push_back(c);
    }
  }
}

// Appends `v` the way Prometheus' Go client prints sample values (strconv 'g' with the shortest
// precision): plain decimals for exponents -4..5, scientific ("3.221225472e+09") outside.
void AppendPromValue(std::string* out, double v) {
  if (std::isnan(v)) {
    out->append("NaN");
    return;
  }
  if (std::isinf(v)) {
    out->append(v > 0 ? "+Inf" : "-Inf");
    return;
  }
  // Whole numbers below 2^53 (every value here but the ratios) are exact, so their shortest
  // representation is their digits without trailing zeros: format them without floating point.
  if (v == std::trunc(v) && std::fabs(v) < 9007199254740992.0) {
    int64_t i = static_cast<int64_t>(v);
    if (i > -1000000 && i < 1000000) {
      AppendPromInt(out, i);
      return;
    }
    char digits[24];
    auto [end, ec] = std::to_chars(digits, digits + sizeof(digits), i < 0 ? -i : i);
    int exponent = static_cast<int>(end - digits) - 1;
    while (end > digits + 1 && end[-1] == '0') --end;
    if (i < 0) out->push_back('-');
    out->push_back(digits[0]);
    if (end > digits + 1) out->append(1, '.').append(digits + 1, end);
    out->append("e+");
    if (exponent < 10) out->push_back('0');
    AppendPromInt(out, exponent);
    return;
  }
  char buf[40];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(end - buf));
  int exponent = 0;
  size_t e = sci.find('e');
  std::from_chars(sci.data() + e + (sci[e + 1] == '+' ? 2 : 1), sci.data() + sci.size(), exponent);
  if (exponent < -4 || exponent >= 6) {
    out->append(sci);
    return;
  }
  auto [fend, fec] = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::fixed);
  out->append(buf, fend);
}

PromPage::PromPage(size_t reserve, std::string_view const_label) : const_label_(const_label) {
  out_.reserve(reserve);
#ifdef MADV_HUGEPAGE
  // A large cluster's page is tens of MiB, written once. Faulting that in 4 KiB pages costs
  // more than rendering it (measured: 130 ms vs 12 ms for 47 MiB in a VM), so ask for huge
  // pages over the aligned middle of the buffer. Advisory: failure changes nothing.
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  if (reserve >= 4 * kHuge) {
    uintptr_t begin = (reinterpret_cast<uintptr_t>(out_.data()) + kHuge - 1) & ~(kHuge - 1);
    uintptr_t end = (reinterpret_cast<uintptr_t>(out_.data()) + reserve) & ~(kHuge - 1);
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
  }
#endif
}

void PromPage::Begin() {
  if (!header_written_) {
    out_.append("# HELP ").append(name_).push_back(' ');
    AppendPromEscaped(&out_, help_, /*quote=*/false);
    out_.append("\n# TYPE ").append(name_).push_back(' ');
    out_.append(type_).push_back('\n');
    header_written_ = true;
  }
  out_.append(name_).push_back('{');
}

}  // namespace hami
