# Writes tools/version.hpp in the build tree with the version and the source's git commit (run at
# every build; the file changes only when the commit does, so nothing rebuilds needlessly).
execute_process(COMMAND git -C "${SRC}" rev-parse --short=12 HEAD OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE
                ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit "unknown")
endif()
execute_process(COMMAND git -C "${SRC}" status --porcelain --untracked-files=no OUTPUT_VARIABLE dirty ERROR_QUIET)
if(NOT dirty STREQUAL "" AND NOT commit STREQUAL "unknown")
  set(commit "${commit}+changes")
endif()
set(text "#pragma once\n#define BNECK_VERSION \"${VERSION}\"\n#define BNECK_COMMIT \"${commit}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
