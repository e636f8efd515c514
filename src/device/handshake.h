// Codec for the registration handshake annotation (`hami.io/node-handshake` for NVIDIA,
// `hami.io/node-handshake-<x>` for other vendors).
//
// The scheduler writes "Requesting_<YYYY-MM-DD HH:MM:SS>" (its local wall-clock time) and
// judges a node by how old that stamp is. Legacy values: device plugins up to v2.7 wrote
// "Reported <Go time.String()>", schedulers up to v2.9 wrote "Deleted_<YYYY-MM-DD HH:MM:SS>".
//
// Every string maps to a state (upstream treats unknown values as "re-stamp"), so decoding is
// total: a Requesting value whose time cannot be read decodes as kRequesting without a time,
// which upstream treats as still fresh.
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "device/wire_time.h"

namespace hami::device {

enum class HandshakeState {
  kAbsent,      // empty value
  kRequesting,  // scheduler asked for a (re)registration at `time`
  kReported,    // legacy plugin report
  kDeleted,     // legacy scheduler cleanup mark
  kOther,       // anything else
};

struct Handshake {
  HandshakeState state = HandshakeState::kAbsent;
  std::optional<CivilTime> time;  // the stamp, when present and readable

  friend bool operator==(const Handshake&, const Handshake&) = default;
};

// "Requesting_2024-05-01 08:30:00".
std::string EncodeHandshakeRequesting(const CivilTime& t);
// Legacy "Deleted_2024-05-01 08:30:00" (only for talking to v2.9-era components).
std::string EncodeHandshakeDeleted(const CivilTime& t);

Handshake DecodeHandshake(std::string_view text);

}  // namespace hami::device
