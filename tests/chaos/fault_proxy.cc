#include "fault_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

namespace hami::chaos {
namespace {

int ConnectLoopback(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

void Reset(int fd) {
  linger l{1, 0};  // close with RST
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  ::shutdown(fd, SHUT_RDWR);
}

}  // namespace

FaultProxy::FaultProxy(Options options) : options_(options), rng_(options.seed) {
  unused_ = {Fate::kDelay, Fate::kReset, Fate::kBlackhole, Fate::kTrickle};
  std::shuffle(unused_.begin(), unused_.end(), rng_);
}

FaultProxy::~FaultProxy() { Stop(); }

int FaultProxy::Start() {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, 512) != 0) {
    return -1;
  }
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  running_ = true;
  acceptor_ = std::thread([this] { AcceptLoop(); });
  return ntohs(addr.sin_port);
}

void FaultProxy::Stop() {
  if (!running_.exchange(false)) return;
  ::shutdown(listen_fd_, SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
  ::close(listen_fd_);
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : sockets_) ::shutdown(fd, SHUT_RDWR);
    threads.swap(connections_);
  }
  for (std::thread& t : threads) t.join();
}

void FaultProxy::SetFaulty(bool faulty) {
  faulty_ = faulty;
  std::lock_guard<std::mutex> lock(mu_);
  for (int fd : sockets_) ::shutdown(fd, SHUT_RDWR);
}

std::map<std::string, int> FaultProxy::Fates() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fates_;
}

FaultProxy::Fate FaultProxy::Draw(uint64_t* limit, int* delay_ms, bool* faulty) {
  std::lock_guard<std::mutex> lock(mu_);
  *faulty = faulty_;
  std::uniform_real_distribution<double> unit(0, 1);
  std::uniform_int_distribution<uint64_t> bytes(0, 4096);
  std::uniform_int_distribution<uint64_t> lifetime(2048, 16384);
  std::uniform_int_distribution<int> delay(1, std::max(1, options_.max_delay_ms));
  std::uniform_int_distribution<int> kind(0, 3);
  // Draw every value every time, so that the sequence depends on the seed alone.
  double p = unit(rng_);
  *limit = bytes(rng_);
  uint64_t life = lifetime(rng_);
  *delay_ms = delay(rng_);
  int k = kind(rng_);
  Fate fate = Fate::kPass;
  if (faulty_ && p < options_.fault_probability) {
    fate = k == 0   ? Fate::kDelay
           : k == 1 ? Fate::kReset
           : k == 2 ? Fate::kBlackhole
                    : Fate::kTrickle;
    if (!unused_.empty()) {  // every kind once first, in an order drawn from the seed
      fate = unused_.back();
      unused_.pop_back();
    }
  }
  if (fate == Fate::kPass) *limit = life;
  static const char* const kNames[] = {"pass", "delay", "reset", "blackhole", "trickle"};
  ++fates_[kNames[static_cast<int>(fate)]];
  return fate;
}

void FaultProxy::AcceptLoop() {
  while (running_) {
    int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) {
      if (!running_) return;
      continue;
    }
    std::lock_guard<std::mutex> lock(mu_);
    connections_.emplace_back([this, client] { Serve(client); });
  }
}

void FaultProxy::Serve(int client) {
  int upstream = ConnectLoopback(options_.upstream_port);
  if (upstream < 0) {
    ::close(client);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    sockets_.push_back(client);
    sockets_.push_back(upstream);
  }
  uint64_t limit = 0;
  int delay_ms = 0;
  bool faulty = false;
  Fate fate = Draw(&limit, &delay_ms, &faulty);
  std::atomic<uint64_t> moved{0};
  std::atomic<bool> broken{false};
  auto pump = [&](int from, int to) {
    char buf[16384];
    std::minstd_rand trickle(static_cast<unsigned>(limit + 1));
    while (running_ && !broken) {
      pollfd p{from, POLLIN, 0};
      if (::poll(&p, 1, 200) <= 0) continue;
      ssize_t n = ::recv(from, buf, sizeof buf, 0);
      if (n <= 0) {
        ::shutdown(to, SHUT_WR);
        return;
      }
      size_t len = static_cast<size_t>(n);
      uint64_t before = moved.fetch_add(len);
      if ((fate == Fate::kReset || fate == Fate::kBlackhole) && before + len > limit) {
        size_t keep = before >= limit ? 0 : static_cast<size_t>(limit - before);
        SendAll(to, buf, keep);
        if (fate == Fate::kReset) {
          broken = true;
          Reset(from);
          Reset(to);
          return;
        }
        // Blackhole: swallow everything from now on, close nothing.
        while (running_) {
          pollfd q{from, POLLIN, 0};
          if (::poll(&q, 1, 200) > 0 && ::recv(from, buf, sizeof buf, 0) <= 0) return;
        }
        return;
      }
      if (fate == Fate::kPass && faulty && before + len > limit) {
        SendAll(to, buf, len);  // a normal end after a while: FIN both ways
        broken = true;
        ::shutdown(from, SHUT_RDWR);
        ::shutdown(to, SHUT_RDWR);
        return;
      }
      if (fate == Fate::kDelay) {
        std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      }
      if (fate == Fate::kTrickle) {
        for (size_t off = 0; off < len;) {
          size_t piece = std::min<size_t>(len - off, 1 + trickle() % 16);
          if (!SendAll(to, buf + off, piece)) return;
          off += piece;
        }
      } else if (!SendAll(to, buf, len)) {
        return;
      }
    }
  };
  std::thread back([&] { pump(upstream, client); });
  pump(client, upstream);
  back.join();
  std::lock_guard<std::mutex> lock(mu_);
  sockets_.erase(std::remove(sockets_.begin(), sockets_.end(), client), sockets_.end());
  sockets_.erase(std::remove(sockets_.begin(), sockets_.end(), upstream), sockets_.end());
  ::close(client);
  ::close(upstream);
}

}  // namespace hami::chaos
