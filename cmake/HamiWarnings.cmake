# hami_warnings(<target>): the project's warning set. Warnings are errors in CI builds only
# (HAMI_WERROR), so a newer compiler on a user's machine never breaks their build.
option(HAMI_WERROR "Treat warnings as errors" OFF)
function(hami_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow -Wno-unused-parameter
                                           -Wnon-virtual-dtor -Wformat=2)
  if(HAMI_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
