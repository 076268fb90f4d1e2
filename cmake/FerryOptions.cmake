# Compiler flags shared by every ferry target: warnings (as errors), sanitizers, SIMD targets,
# the TLS dialect.
include(CheckCXXCompilerFlag)
# TLS descriptors: cheap thread-local reads in position-independent code that may be dlopen'ed
# (Note [Local key sets and the TLS model] in ferry/dispatch/local_dispatch_key_set.h).
check_cxx_compiler_flag(-mtls-dialect=gnu2 FERRY_HAVE_TLS_GNU2)

# ferry_target_flags(target [TEST_CODE]): TEST_CODE marks a test target (see the sanitizers).
function(ferry_target_flags target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "TEST_CODE" "" "")
  set(cxx_warnings -Wall -Wextra -Wpedantic -Wno-missing-field-initializers)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC 12 reports false -Wrestrict positives inside libstdc++'s std::string (GCC bug 105651).
    list(APPEND cxx_warnings -Wno-restrict)
    # GCC 12's -Wmaybe-uninitialized depends on inlining budgets and reports false positives on
    # std::optional copies in large callers (GCC bugs 105562, 107138): it failed a CI build that
    # passed on the development machine. Definite uses (-Wuninitialized) stay errors, and the
    # sanitizer and valgrind runs check the rest.
    list(APPEND cxx_warnings -Wno-maybe-uninitialized)
  endif()
  if(FERRY_WERROR)
    list(APPEND cxx_warnings -Werror)
  endif()
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${cxx_warnings}>)
  if(FERRY_HAVE_TLS_GNU2)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-mtls-dialect=gnu2>)
  endif()
  if(FERRY_WERROR)
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CUDA>:--Werror=all-warnings -Xcompiler=-Wall,-Wextra>)
  endif()
  if(FERRY_SANITIZE)
    set(san -fsanitize=${FERRY_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
    target_link_options(${target} PRIVATE ${san})
    # UBSan's checks are not equally dear to compile. In GCC 12 at -O1, its null, vptr and
    # alignment checks made up about half of what -fsanitize=undefined added to the library's
    # largest batch (60 s with ASan alone, 82 s with UBSan without those three, 118 s with all)
    # and two thirds of it in a test batch (17, 19 and 30 s). ASan reports a null dereference
    # itself, and ferry's polymorphic types are not downcast unchecked, so null and vptr are off
    # everywhere; alignment stays on for the library (its kernels read typed data at any offset a
    # tensor has) and is off for the tests' own code. pointer-overflow (pointer arithmetic that
    # wraps) is off too: it cost 12% of the library's largest ASan batch (26.9 -> 23.8 s) and 6%
    # of a test batch (21.5 -> 20.1 s), 2026-11-30, and a wrapped pointer that is used is an
    # out-of-bounds access, which ASan reports.
    if(FERRY_SANITIZE MATCHES "undefined" AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      if(arg_TEST_CODE)
        list(APPEND san -fno-sanitize=null,vptr,alignment,pointer-overflow)
      else()
        list(APPEND san -fno-sanitize=null,vptr,pointer-overflow)
      endif()
    endif()
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${san}>)
    target_compile_definitions(${target} PRIVATE FERRY_SANITIZER_BUILD=1)
  endif()
  if(FERRY_SIMD_TARGETS STREQUAL "STATIC")
    target_compile_definitions(${target} PRIVATE HWY_COMPILE_ONLY_STATIC=1)
  endif()
endfunction()

# Unity builds: each target's .cc files compiled in batches (one translation unit per batch), so
# that the headers every file includes are parsed, and their inline functions and templates
# compiled, once per batch rather than once per file. It halves the compiler time of the library
# (an ASan build's: 820 s -> 384 s) and cuts a clean build on two cores by about 40%; batches of
# 16 saved only 4% more of the library's compiler time than 8. Names in anonymous namespaces must
# therefore be unique across a target's files; a file that cannot share a translation unit sets
# SKIP_UNITY_BUILD_INCLUSION (with a comment why). Switch it off (-DFERRY_UNITY_BUILD=OFF) to
# compile one file at a time, e.g. to check that a file includes what it uses.
option(FERRY_UNITY_BUILD "Compile each target's sources in batches (CMake unity build)" ON)
set(FERRY_UNITY_BATCH_SIZE 8 CACHE STRING "Source files per unity batch (FERRY_UNITY_BUILD)")

function(ferry_unity_build target)
  if(FERRY_UNITY_BUILD)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_MODE BATCH
                          UNITY_BUILD_BATCH_SIZE ${FERRY_UNITY_BATCH_SIZE})
  endif()
endfunction()
