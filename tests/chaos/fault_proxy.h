// FaultProxy: a TCP proxy for chaos tests that sits between a client and a server and misbehaves
// on a schedule drawn from a seed: per accepted connection it picks one fate, and applies it to
// the bytes flowing either way:
//   pass       forward as is; while faulty, end the connection (FIN both ways) after a random
//              2-16 KiB, so that a client's pooled keep-alive connections keep being replaced
//              and keep drawing fates
//   delay      forward each chunk after a delay (1-`max_delay_ms` ms)
//   reset      forward up to a random byte count, then reset both sides (RST)
//   blackhole  forward up to a random byte count, then forward nothing more and close nothing
//   trickle    forward in pieces of 1-16 bytes (partial writes)
// The first four faulty connections get each fault kind once (in an order drawn from the seed).
// The same seed gives the same sequence of fates (which connection gets which fate depends on
// the order connections arrive). SetFaulty(false) makes every later connection `pass`.
// SetFaulty(true) and SetFaulty(false) also end every open connection: faults then reach pooled
// ones, and a clean connection leaves no stalled one behind (a watch parked on a blackhole would
// hold its informer until its timeout and grace).
//
// Thread safety: Start/Stop from one thread; SetFaulty and counts from any. A thread per
// direction per connection (a test tool, not a server).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace hami::chaos {

class FaultProxy {
 public:
  struct Options {
    int upstream_port = 0;
    uint64_t seed = 1;
    double fault_probability = 0.3;  // share of connections that get a fate other than pass
    int max_delay_ms = 200;
  };
  explicit FaultProxy(Options options);
  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  int Start();  // returns the proxy's port
  void Stop();
  void SetFaulty(bool faulty);
  // How many connections got each fate so far.
  std::map<std::string, int> Fates() const;

 private:
  enum class Fate { kPass, kDelay, kReset, kBlackhole, kTrickle };
  void AcceptLoop();
  void Serve(int client);
  Fate Draw(uint64_t* limit, int* delay_ms, bool* faulty);

  Options options_;
  int listen_fd_ = -1;
  std::atomic<bool> running_{false};
  std::atomic<bool> faulty_{true};
  std::thread acceptor_;
  mutable std::mutex mu_;
  std::mt19937_64 rng_;                   // guarded by mu_
  std::vector<Fate> unused_;              // guarded by mu_: fault kinds not drawn yet
  std::map<std::string, int> fates_;      // guarded by mu_
  std::vector<std::thread> connections_;  // guarded by mu_
  std::vector<int> sockets_;              // guarded by mu_: to shut down on Stop
};

}  // namespace hami::chaos
