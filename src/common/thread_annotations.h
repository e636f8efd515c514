// Lock contracts the compiler checks: clang's thread-safety attributes and annotated mutexes.
//
// A member written `Foo foo_ GUARDED_BY(mu_);` may only be touched with `mu_` held, a function
// marked `REQUIRES(mu_)` only called with it held; clang's -Wthread-safety (scripts/
// thread_safety.sh, part of the test command) turns a violation into a build error. Other
// compilers see plain code: every macro expands to nothing there.
//
//   mutable Mutex mu_;
//   int count_ GUARDED_BY(mu_) = 0;
//   void Bump() { MutexLock l(mu_); ++count_; }
//
// std::mutex and std::shared_mutex carry no annotations in libstdc++, hence the thin wrappers
// below (same cost: one inline call). Condition variables wait on `UniqueLock::native()`; a wait
// predicate that reads guarded state is a lambda marked REQUIRES(the mutex), which holds because
// std::condition_variable only calls it with the lock held.
//
// Thread safety: the wrappers are exactly as thread-safe as the standard mutexes they hold.
#pragma once

#include <mutex>
#include <shared_mutex>

#if defined(__clang__)
#define HAMI_TSA(x) __attribute__((x))
#else
#define HAMI_TSA(x)
#endif

#define CAPABILITY(x) HAMI_TSA(capability(x))
#define SCOPED_CAPABILITY HAMI_TSA(scoped_lockable)
#define GUARDED_BY(x) HAMI_TSA(guarded_by(x))
#define PT_GUARDED_BY(x) HAMI_TSA(pt_guarded_by(x))
#define REQUIRES(...) HAMI_TSA(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) HAMI_TSA(requires_shared_capability(__VA_ARGS__))
#define ACQUIRE(...) HAMI_TSA(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) HAMI_TSA(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) HAMI_TSA(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) HAMI_TSA(release_shared_capability(__VA_ARGS__))
#define RELEASE_GENERIC(...) HAMI_TSA(release_generic_capability(__VA_ARGS__))
#define EXCLUDES(...) HAMI_TSA(locks_excluded(__VA_ARGS__))
#define RETURN_CAPABILITY(x) HAMI_TSA(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS HAMI_TSA(no_thread_safety_analysis)

namespace hami {

class CAPABILITY("mutex") Mutex {
 public:
  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  // For std::unique_lock (condition variables); UniqueLock wraps it with the annotations.
  std::mutex& native() { return mu_; }

 private:
  std::mutex mu_;
};

class CAPABILITY("mutex") SharedMutex {
 public:
  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  void LockShared() ACQUIRE_SHARED() { mu_.lock_shared(); }
  void UnlockShared() RELEASE_SHARED() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Holds a Mutex for its scope.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  ~MutexLock() RELEASE() { mu_.Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

// Holds a Mutex for its scope (or until Unlock()), as a std::unique_lock a condition variable can
// wait on (native()).
class SCOPED_CAPABILITY UniqueLock {
 public:
  explicit UniqueLock(Mutex& mu) ACQUIRE(mu) : lock_(mu.native()) {}
  ~UniqueLock() RELEASE() {}
  UniqueLock(const UniqueLock&) = delete;
  UniqueLock& operator=(const UniqueLock&) = delete;
  void Unlock() RELEASE() { lock_.unlock(); }
  void Lock() ACQUIRE() { lock_.lock(); }
  std::unique_lock<std::mutex>& native() { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

// Holds a SharedMutex exclusively for its scope (or until Unlock()).
class SCOPED_CAPABILITY WriterLock {
 public:
  explicit WriterLock(SharedMutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  ~WriterLock() RELEASE() {
    if (held_) mu_.Unlock();
  }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;
  void Unlock() RELEASE() {
    mu_.Unlock();
    held_ = false;
  }

 private:
  SharedMutex& mu_;
  bool held_ = true;
};

// Holds a SharedMutex shared for its scope (or until Unlock()).
class SCOPED_CAPABILITY ReaderLock {
 public:
  explicit ReaderLock(SharedMutex& mu) ACQUIRE_SHARED(mu) : mu_(mu) { mu_.LockShared(); }
  ~ReaderLock() RELEASE_GENERIC() {
    if (held_) mu_.UnlockShared();
  }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;
  void Unlock() RELEASE_GENERIC() {
    mu_.UnlockShared();
    held_ = false;
  }

 private:
  SharedMutex& mu_;
  bool held_ = true;
};

}  // namespace hami
