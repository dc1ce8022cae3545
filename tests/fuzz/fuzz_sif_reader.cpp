// libFuzzer target: the SIF reader must reject any malformed input with ctr::Error, never
// crash or read out of bounds; whatever it accepts must also render (siftool output).
#include <cstddef>
#include <cstdint>
#include <span>

#include "ctr/error.hpp"
#include "ctr/sif.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace sif = ctr::image::sif;
  try {
    auto image = sif::Image::parse(std::span(data, size));
    (void)sif::formatHeader(image.header());
    (void)sif::formatList(image);
    for (const auto& d : image.usedDescriptors()) (void)sif::formatInfo(d);
    (void)image.primaryPartition();
  } catch (const ctr::Error&) {
  }
  return 0;
}
