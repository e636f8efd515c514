#include "net/http_wire.h"

#include <strings.h>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace hami::net::wire {
namespace {

bool IsTokenChar(unsigned char c) {
  if (std::isalnum(c)) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

bool EqualsNoCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && ::strncasecmp(a.data(), b.data(), a.size()) == 0;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Calls fn(item) for each comma-separated, trimmed, non-empty list element.
template <class Fn>
void ForEachListItem(std::string_view value, Fn fn) {
  while (!value.empty()) {
    size_t comma = value.find(',');
    std::string_view item = Trim(value.substr(0, comma));
    if (!item.empty()) fn(item);
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
}

// Whether an Accept-Encoding element ("gzip", "gzip;q=0.5", "gzip; q=0") accepts gzip.
bool AcceptsGzipItem(std::string_view item) {
  size_t semi = item.find(';');
  std::string_view coding = Trim(item.substr(0, semi));
  if (!EqualsNoCase(coding, "gzip") && !EqualsNoCase(coding, "x-gzip")) return false;
  if (semi == std::string_view::npos) return true;
  std::string_view param = Trim(item.substr(semi + 1));
  if (param.size() < 2 || (param[0] != 'q' && param[0] != 'Q') || param[1] != '=') return true;
  param.remove_prefix(2);
  // q=0, q=0.0, q=0.000 refuse; anything else accepts.
  return !(param.find_first_not_of("0.") == std::string_view::npos && !param.empty() &&
           param[0] == '0');
}

}  // namespace

std::string PercentEncode(std::string_view s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::string PercentDecode(std::string_view s, bool plus_as_space) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '%' && i + 2 < s.size()) {
      int hi = HexValue(s[i + 1]), lo = HexValue(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(plus_as_space && c == '+' ? ' ' : c);
  }
  return out;
}

void ParseQuery(std::string_view query, std::multimap<std::string, std::string>* params) {
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    if (!pair.empty()) {
      size_t eq = pair.find('=');
      std::string key = PercentDecode(pair.substr(0, eq), true);
      std::string value =
          eq == std::string_view::npos ? std::string() : PercentDecode(pair.substr(eq + 1), true);
      params->emplace(std::move(key), std::move(value));
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
}

Status ParseResponseHead(std::string_view head, ResponseHead* out) {
  size_t eol = head.find("\r\n");
  const std::string_view status_line = head.substr(0, eol);
  auto digit = [&](size_t i) { return status_line[i] >= '0' && status_line[i] <= '9'; };
  if (status_line.size() < 12 || status_line.rfind("HTTP/1.", 0) != 0 || !digit(7) ||
      status_line[8] != ' ' || !digit(9) || status_line[9] == '0' || !digit(10) || !digit(11) ||
      (status_line.size() > 12 && status_line[12] != ' ')) {
    return InvalidArgumentError("malformed status line: " + std::string(status_line.substr(0, 80)));
  }
  out->status =
      (status_line[9] - '0') * 100 + (status_line[10] - '0') * 10 + (status_line[11] - '0');
  out->http11 = status_line[7] == '1';
  out->headers.clear();
  while (eol != std::string_view::npos) {
    const size_t next = head.find("\r\n", eol + 2);
    std::string_view line = head.substr(eol + 2, next == head.npos ? head.npos : next - eol - 2);
    eol = next;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
      value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    std::string name(line.substr(0, colon));
    for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    out->headers.emplace_back(std::move(name), std::string(value));
  }
  return OkStatus();
}

namespace {

// Connection-level facts gathered across header lines, settled once the block has been read.
struct HeaderScan {
  bool connection_close = false;
  bool connection_keep_alive = false;
  bool has_te = false;
};

// Cuts the next line off the front of *rest into *line (without its LF or CRLF); false once
// *rest is empty. A final line without a line end is still returned.
bool NextLine(std::string_view* rest, std::string_view* line) {
  if (rest->empty()) return false;
  size_t lf = rest->find('\n');
  *line = rest->substr(0, lf);
  rest->remove_prefix(lf == std::string_view::npos ? rest->size() : lf + 1);
  if (!line->empty() && line->back() == '\r') line->remove_suffix(1);
  return true;
}

// Parses "METHOD SP target SP HTTP/1.x" into out->method, minor_version, path and params.
Status ParseRequestLine(std::string_view line, RequestHead* out) {
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos || sp1 == 0 ||
      sp2 == sp1 + 1 || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return InvalidArgumentError("malformed request line");
  }
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = line.substr(sp2 + 1);
  for (char c : method) {
    if (!IsTokenChar(static_cast<unsigned char>(c))) return InvalidArgumentError("bad method");
  }
  if (version.size() != 8 || version.substr(0, 7) != "HTTP/1." || version[7] < '0' ||
      version[7] > '9') {
    return InvalidArgumentError("unsupported HTTP version");
  }
  for (char c : target) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) return InvalidArgumentError("bad request target");
  }
  out->method = std::string(method);
  out->minor_version = version[7] - '0';
  if (target == "*") {
    out->path = "*";
  } else if (!target.empty() && target[0] == '/') {
    size_t q = target.find('?');
    out->path = PercentDecode(target.substr(0, q), false);
    if (q != std::string_view::npos) ParseQuery(target.substr(q + 1), &out->params);
  } else {
    return InvalidArgumentError("request target must be a path");
  }
  return OkStatus();
}

// Splits a non-empty header line into a token *name and a trimmed *value free of control
// characters (tab aside); InvalidArgument for folding, a missing name or a bad byte.
Status SplitHeaderLine(std::string_view line, std::string_view* name, std::string_view* value) {
  if (line[0] == ' ' || line[0] == '\t') return InvalidArgumentError("obsolete line folding");
  size_t colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0) {
    return InvalidArgumentError("malformed header line");
  }
  *name = line.substr(0, colon);
  for (char c : *name) {
    if (!IsTokenChar(static_cast<unsigned char>(c))) {
      return InvalidArgumentError("bad header name");
    }
  }
  *value = Trim(line.substr(colon + 1));
  for (char c : *value) {
    unsigned char u = static_cast<unsigned char>(c);
    if ((u < 0x20 && u != '\t') || u == 0x7f) {
      return InvalidArgumentError("control character in header value");
    }
  }
  return OkStatus();
}

// Applies the headers that drive framing and negotiation (Content-Length, Transfer-Encoding,
// Connection, Expect, Accept-Encoding) to *out and *scan; others are left alone. Refuses a
// Content-Length that is unparsable or differs from an earlier one, and any transfer coding
// but a single "chunked".
Status ApplyHeader(std::string_view name, std::string_view value, RequestHead* out,
                   HeaderScan* scan) {
  if (EqualsNoCase(name, "Content-Length")) {
    uint64_t n = 0;
    if (!ParseContentLength(value, &n)) return InvalidArgumentError("bad Content-Length");
    if (out->has_length && out->content_length != n) {
      return InvalidArgumentError("conflicting Content-Length headers");
    }
    out->has_length = true;
    out->content_length = n;
  } else if (EqualsNoCase(name, "Transfer-Encoding")) {
    scan->has_te = true;
    bool only_chunked = true;
    int items = 0;
    ForEachListItem(value, [&](std::string_view item) {
      ++items;
      if (!EqualsNoCase(item, "chunked")) only_chunked = false;
    });
    if (!only_chunked || items != 1 || out->chunked) {
      return InvalidArgumentError("unsupported Transfer-Encoding");
    }
    out->chunked = true;
  } else if (EqualsNoCase(name, "Connection")) {
    ForEachListItem(value, [&](std::string_view item) {
      if (EqualsNoCase(item, "close")) scan->connection_close = true;
      if (EqualsNoCase(item, "keep-alive")) scan->connection_keep_alive = true;
    });
  } else if (EqualsNoCase(name, "Expect")) {
    if (EqualsNoCase(value, "100-continue")) out->expect_continue = true;
  } else if (EqualsNoCase(name, "Accept-Encoding")) {
    ForEachListItem(value, [&](std::string_view item) {
      if (AcceptsGzipItem(item)) out->accepts_gzip = true;
    });
  }
  return OkStatus();
}

}  // namespace

Status ParseRequestHead(std::string_view head, RequestHead* out) {
  *out = RequestHead();
  std::string_view line;
  if (!NextLine(&head, &line)) return InvalidArgumentError("empty request");
  HAMI_RETURN_IF_ERROR(ParseRequestLine(line, out));

  HeaderScan scan;
  while (NextLine(&head, &line)) {
    if (line.empty()) break;  // tolerated: the caller normally cuts before the blank line
    std::string_view name, value;
    HAMI_RETURN_IF_ERROR(SplitHeaderLine(line, &name, &value));
    HAMI_RETURN_IF_ERROR(ApplyHeader(name, value, out, &scan));
    out->headers.emplace(std::string(name), std::string(value));
  }
  if (scan.has_te && out->has_length) {
    return InvalidArgumentError("both Content-Length and Transfer-Encoding");
  }
  out->keep_alive = out->minor_version >= 1
                        ? !scan.connection_close
                        : (scan.connection_keep_alive && !scan.connection_close);
  return OkStatus();
}

bool ParseContentLength(std::string_view text, uint64_t* length) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string_view::npos) {
    return false;
  }
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *length);
  return ec == std::errc() && end == text.data() + text.size();
}

bool ParseChunkSizeLine(std::string_view line, uint64_t* size) {
  size_t digits = line.find_first_not_of("0123456789abcdefABCDEF");
  if (digits == std::string_view::npos) digits = line.size();
  if (digits == 0) return false;
  auto [end, ec] = std::from_chars(line.data(), line.data() + digits, *size, 16);
  if (ec != std::errc() || end != line.data() + digits) return false;
  std::string_view rest = line.substr(digits);
  size_t semi = rest.find_first_not_of(" \t");
  return rest.empty() || (semi != std::string_view::npos && rest[semi] == ';');
}

ChunkedDecoder::State ChunkedDecoder::Feed(std::string_view in, size_t* used, std::string* body) {
  constexpr size_t kMaxLine = 4096;       // a chunk-size line with extensions
  constexpr size_t kMaxTrailers = 16384;  // all trailer lines together
  size_t i = 0;
  auto fail = [&](std::string why) {
    error_ = std::move(why);
    *used = i;
    return State::kError;
  };
  while (i < in.size() && phase_ != Phase::kDone) {
    switch (phase_) {
      case Phase::kSize:
      case Phase::kTrailer: {
        size_t lf = in.find('\n', i);
        size_t take = (lf == std::string_view::npos ? in.size() : lf) - i;
        if (line_.size() + take > kMaxLine) return fail("chunk line too long");
        line_.append(in.substr(i, take));
        if (lf == std::string_view::npos) {
          i = in.size();
          break;
        }
        i = lf + 1;
        if (!line_.empty() && line_.back() == '\r') line_.pop_back();
        if (phase_ == Phase::kTrailer) {
          trailer_bytes_ += line_.size();
          if (trailer_bytes_ > kMaxTrailers) return fail("trailers too long");
          if (line_.empty()) phase_ = Phase::kDone;
          line_.clear();
          break;
        }
        uint64_t n = 0;
        if (!ParseChunkSizeLine(line_, &n)) return fail("bad chunk size");
        line_.clear();
        if (n == 0) {
          phase_ = Phase::kTrailer;
        } else {
          if (n > max_body_ || body->size() > max_body_ - n) {
            too_large_ = true;
            return fail("request body too large");
          }
          remaining_ = n;
          phase_ = Phase::kData;
        }
        break;
      }
      case Phase::kData: {
        size_t take = static_cast<size_t>(std::min<uint64_t>(remaining_, in.size() - i));
        body->append(in.substr(i, take));
        i += take;
        remaining_ -= take;
        if (remaining_ == 0) phase_ = Phase::kDataEnd;
        break;
      }
      case Phase::kDataEnd: {
        // CRLF (or a bare LF) after the data.
        if (in[i] == '\r' && line_.empty()) {
          line_ = "\r";
          ++i;
          break;
        }
        if (in[i] != '\n') return fail("missing CRLF after chunk data");
        ++i;
        line_.clear();
        phase_ = Phase::kSize;
        break;
      }
      case Phase::kDone:
        break;
    }
  }
  *used = i;
  return phase_ == Phase::kDone ? State::kDone : State::kMore;
}

const char* ReasonPhrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 101:
      return "Switching Protocols";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 206:
      return "Partial Content";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 304:
      return "Not Modified";
    case 307:
      return "Temporary Redirect";
    case 308:
      return "Permanent Redirect";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 406:
      return "Not Acceptable";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 411:
      return "Length Required";
    case 412:
      return "Precondition Failed";
    case 413:
      return "Payload Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 417:
      return "Expectation Failed";
    case 422:
      return "Unprocessable Entity";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "Unknown";
  }
}

size_t FindHeadEnd(std::string_view buf, size_t from, size_t* sep) {
  for (size_t p = buf.find('\n', from); p != std::string_view::npos; p = buf.find('\n', p + 1)) {
    size_t next = p + 1;
    if (next < buf.size() && buf[next] == '\r') ++next;
    if (next >= buf.size() || buf[next] != '\n') continue;
    size_t end = p > 0 && buf[p - 1] == '\r' ? p - 1 : p;
    *sep = next + 1 - end;
    return end;
  }
  return std::string_view::npos;
}

bool RequestScan::Ready(std::string_view buf, uint64_t max_body_bytes) {
  if (head_end_ == std::string::npos) {
    size_t sep = 0, end = FindHeadEnd(buf, scanned_ > 3 ? scanned_ - 3 : 0, &sep);
    if (end == std::string::npos) {
      scanned_ = buf.size();
      return buf.size() > kMaxHeadBytes;
    }
    if (end > kMaxHeadBytes) return true;
    RequestHead head;
    if (!ParseRequestHead(buf.substr(0, end), &head).ok()) return true;
    head_end_ = end + sep;
    fed_ = head_end_;
    chunked_ = head.chunked;
    need_ = head.has_length ? head.content_length : 0;
    if (head.has_length && need_ > max_body_bytes) return true;
    if (head.expect_continue && (chunked_ || need_ > 0) && buf.size() == head_end_) return true;
    if (chunked_) decoder_ = std::make_unique<ChunkedDecoder>(max_body_bytes);
  }
  if (chunked_) {
    size_t used = 0;
    std::string sink;
    auto state = decoder_->Feed(buf.substr(fed_), &used, &sink);
    fed_ += used;
    return state != ChunkedDecoder::State::kMore;
  }
  return buf.size() - head_end_ >= need_;
}

}  // namespace hami::net::wire
