# Writes build_info.cpp (cmake -P, at every build): the git revision of SOURCE_DIR and the
# build options given as -D. configure_file leaves the output untouched when its text is
# the same, so only a new revision or option recompiles it.
execute_process(COMMAND git -C "${SOURCE_DIR}" describe --always --dirty --abbrev=12
  OUTPUT_VARIABLE CTR_REVISION RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT rc EQUAL 0 OR CTR_REVISION STREQUAL "")
  set(CTR_REVISION "unknown")
endif()
configure_file("${TEMPLATE}" "${OUTPUT}" @ONLY)
