#include "device/handshake.h"

namespace hami::device {

namespace {

constexpr std::string_view kRequesting = "Requesting";
constexpr std::string_view kDeleted = "Deleted_";
constexpr std::string_view kReported = "Reported";

std::optional<CivilTime> TimeAfter(std::string_view text, char sep) {
  size_t pos = text.find(sep);
  if (pos == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(pos + 1);
  // Go's time.String() continues after the seconds (".123 +0800 CST ..."): read the prefix.
  Result<CivilTime> t = ParseDateTime(rest.substr(0, 19));
  if (!t.ok()) return std::nullopt;
  return *t;
}

}  // namespace

std::string EncodeHandshakeRequesting(const CivilTime& t) {
  return "Requesting_" + FormatDateTime(t);
}

std::string EncodeHandshakeDeleted(const CivilTime& t) { return "Deleted_" + FormatDateTime(t); }

Handshake DecodeHandshake(std::string_view text) {
  Handshake h;
  if (text.empty()) return h;
  if (text.find(kRequesting) != std::string_view::npos) {
    // Upstream: the stamp is everything after the first '_', and must be exactly a DateTime.
    h.state = HandshakeState::kRequesting;
    size_t pos = text.find('_');
    if (pos != std::string_view::npos) {
      Result<CivilTime> t = ParseDateTime(text.substr(pos + 1));
      if (t.ok()) h.time = *t;
    }
    return h;
  }
  if (text.substr(0, kDeleted.size()) == kDeleted) {
    h.state = HandshakeState::kDeleted;
    h.time = TimeAfter(text, '_');
    return h;
  }
  if (text.substr(0, kReported.size()) == kReported) {
    h.state = HandshakeState::kReported;
    h.time = TimeAfter(text, ' ');
    return h;
  }
  h.state = HandshakeState::kOther;
  return h;
}

}  // namespace hami::device
