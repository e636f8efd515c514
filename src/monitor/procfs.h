// What the node monitor reads of other processes in /proc (it runs in the host's PID namespace):
// a process's start time, its PID in every namespace it is nested in, and whether it maps a
// given file. The parsers are pure and take the file's text; ProcFs reads a proc root.
//
// Thread safety: pure functions; ProcFs holds only its root path.
#pragma once

#include <sys/types.h>

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hami::monitor {

// Field 22 of /proc/<pid>/stat (start time in clock ticks since boot, as libvgpu records it);
// nullopt when malformed or the process is a zombie.
std::optional<uint64_t> ParseStatStartTime(std::string_view stat);
// The "NSpid:" line of /proc/<pid>/status: the PID in the proc mount's namespace first, the
// innermost namespace's last. Empty when absent or malformed (kernels before 4.1 lack it).
std::vector<int> ParseNsPids(std::string_view status);
// A file as the kernel identifies it.
struct FileId {
  uint64_t dev = 0, ino = 0;
  friend bool operator==(const FileId&, const FileId&) = default;
  friend auto operator<=>(const FileId&, const FileId&) = default;
};
FileId FileIdOf(dev_t dev, ino_t ino);
// The files a /proc/<pid>/maps text maps (each once, sorted).
std::vector<FileId> ParseMappedFiles(std::string_view maps);

class ProcFs {
 public:
  explicit ProcFs(std::string root = "/proc") : root_(std::move(root)) {}
  std::optional<uint64_t> StartTime(int pid) const;
  std::vector<int> NsPids(int pid) const;
  // The /proc/<pid>/maps text, "" when the process is gone or unreadable.
  std::string Maps(int pid) const;
  // Whether (pid, start_time) still runs.
  bool Alive(int pid, uint64_t start_time) const;
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

}  // namespace hami::monitor
