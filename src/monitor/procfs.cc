#include "monitor/procfs.h"

#include <fcntl.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>

namespace hami::monitor {
namespace {

// Reads a whole (small or procfs) file; "" when it cannot be opened.
std::string ReadAll(const std::string& path, size_t limit) {
  std::string out;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[16384];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() >= limit) break;
  }
  close(fd);
  return out;
}

template <typename T>
bool ParseNumber(std::string_view s, T* out, int base = 10) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out, base);
  return ec == std::errc() && end == s.data() + s.size();
}

std::string_view NextField(std::string_view* line) {
  size_t start = line->find_first_not_of(" \t");
  if (start == std::string_view::npos) {
    *line = {};
    return {};
  }
  line->remove_prefix(start);
  size_t end = line->find_first_of(" \t");
  std::string_view field = line->substr(0, end);
  line->remove_prefix(end == std::string_view::npos ? line->size() : end);
  return field;
}

// The line of `text` starting at `*pos` (without its newline); advances `*pos` past it.
std::string_view NextLine(std::string_view text, size_t* pos) {
  size_t eol = text.find('\n', *pos);
  size_t end = eol == std::string_view::npos ? text.size() : eol;
  std::string_view line = text.substr(*pos, end - *pos);
  *pos = end + 1;
  return line;
}

}  // namespace

std::optional<uint64_t> ParseStatStartTime(std::string_view stat) {
  // Field 2 is the command in parentheses and may itself hold spaces and ')': fields resume
  // after the last ')'.
  size_t paren = stat.rfind(')');
  if (paren == std::string_view::npos) return std::nullopt;
  std::string_view rest = stat.substr(paren + 1);
  std::string_view state = NextField(&rest);  // field 3
  if (state.empty() || state[0] == 'Z' || state[0] == 'X' || state[0] == 'x') return std::nullopt;
  std::string_view field;
  for (int i = 4; i <= 22; ++i) field = NextField(&rest);
  uint64_t v = 0;
  if (!ParseNumber(field, &v)) return std::nullopt;
  return v;
}

std::vector<int> ParseNsPids(std::string_view status) {
  std::vector<int> pids;
  for (size_t pos = 0; pos < status.size();) {
    std::string_view line = NextLine(status, &pos);
    if (line.substr(0, 6) != "NSpid:") continue;
    line.remove_prefix(6);
    for (std::string_view f = NextField(&line); !f.empty(); f = NextField(&line)) {
      int pid = 0;
      if (!ParseNumber(f, &pid) || pid <= 0) return {};
      pids.push_back(pid);
    }
    return pids;
  }
  return pids;
}

FileId FileIdOf(dev_t dev, ino_t ino) {
  return FileId{static_cast<uint64_t>(dev), static_cast<uint64_t>(ino)};
}

std::vector<FileId> ParseMappedFiles(std::string_view maps) {
  // "start-end perms offset major:minor inode  path", device numbers in hex.
  std::vector<FileId> files;
  for (size_t pos = 0; pos < maps.size();) {
    std::string_view line = NextLine(maps, &pos);
    NextField(&line);  // range
    NextField(&line);  // perms
    NextField(&line);  // offset
    std::string_view devs = NextField(&line);
    std::string_view inode = NextField(&line);
    size_t colon = devs.find(':');
    if (colon == std::string_view::npos) continue;
    unsigned maj = 0, min = 0;
    uint64_t in = 0;
    if (!ParseNumber(devs.substr(0, colon), &maj, 16) ||
        !ParseNumber(devs.substr(colon + 1), &min, 16) || !ParseNumber(inode, &in) || in == 0) {
      continue;
    }
    files.push_back(FileId{static_cast<uint64_t>(makedev(maj, min)), in});
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  return files;
}

std::optional<uint64_t> ProcFs::StartTime(int pid) const {
  return ParseStatStartTime(ReadAll(root_ + "/" + std::to_string(pid) + "/stat", 4096));
}

std::vector<int> ProcFs::NsPids(int pid) const {
  return ParseNsPids(ReadAll(root_ + "/" + std::to_string(pid) + "/status", 65536));
}

std::string ProcFs::Maps(int pid) const {
  // A CUDA process maps a few thousand areas (~100 bytes each); 64 MiB bounds a runaway.
  return ReadAll(root_ + "/" + std::to_string(pid) + "/maps", 64u << 20);
}

bool ProcFs::Alive(int pid, uint64_t start_time) const {
  if (pid <= 0) return false;
  std::optional<uint64_t> st = StartTime(pid);
  return st && *st == start_time;
}

}  // namespace hami::monitor
