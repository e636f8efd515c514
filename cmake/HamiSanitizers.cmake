# Applies HAMI_SANITIZE to every target defined after this point.
#   address -> AddressSanitizer + UndefinedBehaviorSanitizer
#   thread  -> ThreadSanitizer
# The preload library is special: a sanitized libvgpu.so can only be preloaded after the
# sanitizer runtime (tests/ handles that by putting the runtime first in LD_PRELOAD).
if(HAMI_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
elseif(HAMI_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
elseif(NOT HAMI_SANITIZE STREQUAL "")
  message(FATAL_ERROR "HAMI_SANITIZE must be '', 'address' or 'thread', not '${HAMI_SANITIZE}'")
endif()

# Path of the sanitizer runtime, for tests that preload a sanitized libvgpu.so into a process:
# the runtime must come first in LD_PRELOAD.
set(HAMI_SANITIZER_PRELOAD "")
if(HAMI_SANITIZE STREQUAL "address")
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libasan.so
                  OUTPUT_VARIABLE HAMI_SANITIZER_PRELOAD OUTPUT_STRIP_TRAILING_WHITESPACE)
elseif(HAMI_SANITIZE STREQUAL "thread")
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libtsan.so
                  OUTPUT_VARIABLE HAMI_SANITIZER_PRELOAD OUTPUT_STRIP_TRAILING_WHITESPACE)
endif()
