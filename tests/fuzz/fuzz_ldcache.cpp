// libFuzzer target: the ld.so cache reader must reject any malformed cache with ctr::Error,
// never crash or read out of bounds; whatever it accepts must also go through selection.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ctr/error.hpp"
#include "ctr/ldcache.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace host = ctr::host;
  try {
    const auto cache = host::parseLdCache(std::as_bytes(std::span(data, size)), "fuzz");
    for (const auto& e : cache.entries) (void)host::describeLdCacheFlags(e.flags);
    // A root with nothing under it: every pick fails its ELF check, which is reported.
    static const std::vector<std::string> listed{"libz.so", "libm.so", "ld-linux-x86-64.so"};
    (void)host::selectLibraries(cache, listed, host::ElfIdentity{2, 1, 62}, "/nonexistent");
  } catch (const ctr::Error&) {
  }
  return 0;
}
