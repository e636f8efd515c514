// Prometheus text exposition (format 0.0.4), as the project's exporters write it: every family a
// gauge, every series ending with one constant label (zone="vGPU" for HAMi's metric names).
//
//   PromPage p(4096);
//   p.Family("hami_vgpu_memory_used_bytes", "Device memory a container uses, in bytes");
//   p.Begin();
//   p.Label("namespace", ns);     // escaped here
//   p.IntLabel("vdevice_index", 0);
//   p.End(1.5e9);                 // appends zone="vGPU" and the value
//   std::string page = p.Take();
//
// A family's HELP/TYPE header is written with its first series, so families without series do
// not appear. Values print as Prometheus' Go client prints them (shortest round-trip 'g' form).
//
// Thread safety: a PromPage is used by one thread; the free functions are pure.
#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

namespace hami {

// Whether `s` holds a backslash, newline or double quote (needs escaping as a label value).
bool PromNeedsEscaping(std::string_view s);
// Appends `s` escaped for the text format: backslash, newline and (when `quote`, i.e. for label
// values) the double quote.
void AppendPromEscaped(std::string* out, std::string_view s, bool quote);
// Appends a sample value: plain decimals for exponents -4..5, scientific outside, NaN, +Inf.
void AppendPromValue(std::string* out, double v);

template <typename Int>
void AppendPromInt(std::string* out, Int v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, end);
}

class PromPage {
 public:
  // `reserve`: expected size in bytes (large pages ask the kernel for huge pages). The constant
  // label closes every series.
  explicit PromPage(size_t reserve, std::string_view const_label = "zone=\"vGPU\"");

  // `type` is "gauge" for every HAMi family; "untyped" serves a name the text format's linters
  // reserve (a gauge named *_count reads as part of a summary).
  void Family(std::string_view name, std::string_view help, std::string_view type = "gauge") {
    name_ = name;
    help_ = help;
    type_ = type;
    header_written_ = false;
  }
  // Starts a series of the current family; follow with Label()s and End().
  void Begin();
  void Label(std::string_view key, std::string_view value) {
    out_.append(key).append("=\"");
    AppendPromEscaped(&out_, value, /*quote=*/true);
    out_.append("\",");
  }
  // A label whose value is already escaped (callers escape a row's strings once).
  void Escaped(std::string_view key, std::string_view value) {
    out_.append(key).append("=\"").append(value).append("\",");
  }
  template <typename Int>
  void IntLabel(std::string_view key, Int value) {
    out_.append(key).append("=\"");
    AppendPromInt(&out_, value);
    out_.append("\",");
  }
  void End(double value) {
    out_.append(const_label_).append("} ");
    AppendPromValue(&out_, value);
    out_.push_back('\n');
  }

  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
  std::string const_label_;
  std::string_view name_, help_, type_ = "gauge";
  bool header_written_ = false;
};

}  // namespace hami
