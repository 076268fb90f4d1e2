// A `ferry serve` worker process (`ferry switch-worker`, started by the controller, never by
// hand): it imports its device's region and adopts it, carves its workspace sub-region, maps
// every model's weights from the controller's shared pinned memory (no copy, no disk), builds
// every model's graph and primes the device, then says it is ready. From then on it is warm: a
// switch never forks, initializes a runtime or reads a file. It runs one message at a time:
// a request for its resident model, a request that switches a model into a parameters
// sub-region the controller names (pipelined, as in process), or an eviction that gives the
// weights back and drops the sub-region. A run of a resident model that the controller marks
// preemptible stops between two layers when kPreemptSignal arrives with its token, and is
// answered with ErrorCode::preempted.
// Guarantees: the worker's device memory comes only from the region (activations from its
// workspace sub-region, weights from its parameters sub-region); every request is answered with
// the client protocol's frame, an error included; it dies with the controller (PR_SET_PDEATHSIG)
// and exits when the channel closes.
#pragma once

#include <sys/types.h>

#include <csignal>

namespace ferry::switch_ {

// The controller preempts a worker's run with this signal (sigqueue, the run's token as value).
inline constexpr int kPreemptSignal = SIGUSR1;

// Runs the worker on the connected socket `channel_fd` until told to stop or the controller is
// gone; `parent` is the controller's pid (the worker exits at once if it is no longer its
// parent). Returns the process's exit status.
int run_serve_worker(int channel_fd, pid_t parent);

}  // namespace ferry::switch_
