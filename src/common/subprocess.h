// Subprocess: starts a program with an explicit environment, captures its stdout and stderr,
// and lets the caller feed/close its stdin, read until a marker, signal it and wait for it.
// Used by the integration tests, the benchmarks and hamictl's demo.
//
// Thread safety: one Subprocess object belongs to one thread. The destructor kills (SIGKILL)
// and reaps a child that was not waited for, so no test leaks processes.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace hami {

struct ProcessResult {
  int exit_code = -1;  // exit status, or 128 + signal number when killed by a signal
  std::string out;
  std::string err;
};

class Subprocess {
 public:
  // Starts argv[0] (a path) with exactly `env` (KEY=VALUE strings) as its environment.
  Subprocess(const std::vector<std::string>& argv, const std::vector<std::string>& env);
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  // Reads stdout until it contains `marker` or reaches EOF; returns everything read so far.
  const std::string& ReadUntil(const std::string& marker);
  // Writes all of `data` to the child's stdin; false when stdin is closed or the write fails.
  bool WriteStdin(const std::string& data);
  void CloseStdin();
  void Signal(int sig);
  // Closes stdin, drains both pipes and reaps the child.
  ProcessResult Wait();
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1, out_ = -1, err_ = -1;
  bool waited_ = false;
  ProcessResult result_;
};

// Runs to completion.
ProcessResult RunProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env);

// The first executable `name` in $PATH, or "" (tests skip when a tool such as kubectl is absent).
std::string FindOnPath(const std::string& name);

// Parses into its key=value tokens the first line of `text` that either starts with the label
// `key` (followed by a space) or contains "`key`=".
std::map<std::string, std::string> KeyValues(const std::string& text, const std::string& key);

// Every line of `text` of the form key=value (split at its first '='; the value keeps its spaces
// and any further '='). Lines without '=' are skipped; a later line wins over an earlier key.
std::map<std::string, std::string> KeyValueLines(const std::string& text);

// Sets `entry` (KEY=VALUE) in an environment list, removing every earlier entry of that name:
// getenv takes the first of duplicates, so appending alone would not override.
void SetEnv(std::vector<std::string>& env, const std::string& entry);

}  // namespace hami
