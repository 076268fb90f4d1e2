// For tests of what ferry's threads do under an OpenMP binding (OMP_PROC_BIND). The OpenMP
// runtime that oneDNN loads reads the binding only when it loads, and binds the process's initial
// thread to one CPU then; so such a test runs itself again in a new process with the binding and
// makes its checks there.
#pragma once

#include <sys/types.h>

namespace ferry::testing {

// The number of CPUs thread `tid` may run on (0: the calling thread); -1 if it cannot be read.
int thread_cpu_count(pid_t tid = 0);

// Whether this process is the one run_under_openmp_binding started.
bool in_openmp_bound_process();

// Outside that process: runs the calling test again in a new process under
// `OMP_PROC_BIND=true OMP_PLACES=threads`, and fails or skips as it does (skips at once on a
// machine with one CPU). Call it last in the test body.
void run_under_openmp_binding();

// Inside that process: skips the test unless the runtime bound the initial thread to one CPU of
// several (the caller returns when ::testing::Test::IsSkipped()).
void skip_unless_bound_to_one_cpu();

}  // namespace ferry::testing
