// Names the calling thread for `top -H`, `ps -L`, perf and debuggers ("http-conn",
// "informer-pods", ...). Linux keeps 15 bytes; longer names are cut.
#pragma once

#include <pthread.h>

#include <string>
#include <string_view>

namespace hami {

inline void SetCurrentThreadName(std::string_view name) {
  std::string cut(name.substr(0, 15));
  (void)pthread_setname_np(pthread_self(), cut.c_str());
}

}  // namespace hami
