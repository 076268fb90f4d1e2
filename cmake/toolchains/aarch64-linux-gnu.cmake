# Cross-compiling ferry for 64-bit Arm Linux with Debian's cross toolchain (g++-aarch64-linux-gnu)
# and the arm64 packages of the dependencies (multiarch), running the tests under qemu-user.
# scripts/cross-aarch64.sh installs all of it and uses this file; FERRY_ARM64_SYSROOT names a
# directory holding the arm64 packages that cannot be installed beside their amd64 twins
# (libdnnl-dev: its dnnl_config.h differs between architectures), extracted with dpkg -x.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(FERRY_ARM64_SYSROOT "" CACHE PATH "Extracted arm64 packages that are not co-installable")
if(FERRY_ARM64_SYSROOT)
  # Searched before /usr: its headers (oneDNN's arch-specific dnnl_config.h) must win.
  list(PREPEND CMAKE_PREFIX_PATH "${FERRY_ARM64_SYSROOT}/usr")
  include_directories(BEFORE SYSTEM "${FERRY_ARM64_SYSROOT}/usr/include")
endif()

# Only the arm64 libraries: never link an amd64 one found under /usr/lib/x86_64-linux-gnu.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_IGNORE_PATH /usr/lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu/cmake)

# ctest runs the test binaries through qemu, with the loader of the multiarch libc6:arm64 (in
# /lib, beside the libc.so.6 the binaries load from /lib/aarch64-linux-gnu). Not the cross
# toolchain's copy under /usr/aarch64-linux-gnu: that one is another build of glibc (2.36-8cross1
# against 2.36-9+deb12u14), whose ld.so and the multiarch libc.so.6 disagree on the loader's
# shared state, and the first pthread_create then loops forever over a list it misreads.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-L;/)
