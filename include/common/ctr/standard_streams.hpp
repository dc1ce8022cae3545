// std::cin, std::cout, std::cerr and std::clog (and their wide twins), declared without the
// start-up cost <iostream> brings: in libstdc++ before GCC 13 every source that includes it
// holds a static std::ios_base::Init, whose construction builds the classic locale and the
// eight stream objects before main. In a launch that runs a kept plan that was 0.12 ms of a
// 1.7 ms launch, for streams it never uses (docs/benchmark-guide.md, "The standard streams
// at start-up"). ctr's sources include this header instead of <iostream>, ahead of CLI11
// (which includes <iostream>), and call initStandardStreams() before a stream is used: main
// does for everything but a kept plan's launch, and the error reports do.
#pragma once

#if defined(__GLIBCXX__) && !defined(_GLIBCXX_IOSTREAM)
#include <istream>
#include <ostream>
// <iostream>'s include guard: a later #include <iostream> (CLI11's) adds nothing, so no
// static std::ios_base::Init either. The declarations are the ones <iostream> makes.
#define _GLIBCXX_IOSTREAM 1
namespace std _GLIBCXX_VISIBILITY(default) {
_GLIBCXX_BEGIN_NAMESPACE_VERSION
extern istream cin;
extern ostream cout;
extern ostream cerr;
extern ostream clog;
extern wistream wcin;
extern wostream wcout;
extern wostream wcerr;
extern wostream wclog;
_GLIBCXX_END_NAMESPACE_VERSION
}  // namespace std
#else
#include <iostream>
#endif

namespace ctr {

// Constructs the standard streams (once; a std::ios_base::Init that lives until exit, which
// then flushes them). Cheap after the first call.
void initStandardStreams();

}  // namespace ctr
