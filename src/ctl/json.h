// JsonWriter: builds indented JSON text for hamictl's --json outputs; JsonScalars: pulls values
// back out of such text (for the demo's checks and the tests).
//
// The writer trusts its caller to nest correctly (Begin/End pairs, Key before each value inside
// an object); it escapes every string it is given, so any byte sequence from a region file or a
// driver yields valid JSON.
//
// Thread safety: a JsonWriter belongs to one thread. JsonScalars is pure.
#pragma once

#include <stdint.h>

#include <string>
#include <string_view>
#include <vector>

namespace hami::ctl {

class JsonWriter {
 public:
  JsonWriter() = default;
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;

  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(std::string_view key);
  JsonWriter& String(std::string_view value);
  JsonWriter& Int(int64_t value);
  JsonWriter& Uint(uint64_t value);
  // Finite values with up to three decimals; NaN and infinities become null.
  JsonWriter& Double(double value);
  JsonWriter& Bool(bool value);
  JsonWriter& Null();

  // The document so far, followed by a newline once the outermost value is closed.
  std::string str() const;

 private:
  void BeforeValue();
  void Open(char c);
  void Close(char c);

  std::string out_;
  std::vector<bool> has_items_;  // one entry per open container
  bool after_key_ = false;
};

// Quotes and escapes `s` as a JSON string.
std::string JsonQuote(std::string_view s);

// Every scalar value written after "`key`": in `json`, in document order, as raw text (strings
// unquoted, but not unescaped). Meant for the output of JsonWriter, not for arbitrary JSON.
std::vector<std::string> JsonScalars(std::string_view json, std::string_view key);

}  // namespace hami::ctl
