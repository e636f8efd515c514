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
