# Compiler flags shared by every ferry target: warnings (as errors), sanitizers, SIMD targets,
# the TLS dialect.
include(CheckCXXCompilerFlag)
# TLS descriptors: cheap thread-local reads in position-independent code that may be dlopen'ed
# (Note [Local key sets and the TLS model] in ferry/dispatch/local_dispatch_key_set.h).
check_cxx_compiler_flag(-mtls-dialect=gnu2 FERRY_HAVE_TLS_GNU2)

function(ferry_target_flags target)
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
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${san}>)
    target_link_options(${target} PRIVATE ${san})
    target_compile_definitions(${target} PRIVATE FERRY_SANITIZER_BUILD=1)
  endif()
  if(FERRY_SIMD_TARGETS STREQUAL "STATIC")
    target_compile_definitions(${target} PRIVATE HWY_COMPILE_ONLY_STATIC=1)
  endif()
endfunction()
