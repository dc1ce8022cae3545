// Image-internal: stopping a build's children from a signal handler (builder.cpp).
#pragma once

namespace ctr::image {

// Remembers where this process's children are listed; call before installing a handler.
void prepareChildTermination();
// Sends `sig` to every child of this process. Async-signal-safe.
void terminateChildren(int sig);

}  // namespace ctr::image
