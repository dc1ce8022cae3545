// libFuzzer target: the chunk table in an ORAS config (issue 57) comes from a registry, so
// parseChunkTableConfig must refuse anything malformed with ctr::Error, never crash, and
// never allocate by a size the text claims. What it accepts must be consistent (its chunks
// cover the blob exactly) and print back to a text that parses to the same table. The same
// for the form served beside an image on a web server (parseUrlChunkTable).
//
// Input: "<blob size in decimal>\n<config text>", so that the seeds are readable and the
// fuzzer can make the size in the manifest and the one in the table agree; without a first
// line that is a number, the whole input is the config and the blob size is 0.
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ctr/chunk_table.hpp"
#include "ctr/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace image = ctr::image;
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::uint64_t blobSize = 0;
  if (const auto newline = input.find('\n'); newline != std::string_view::npos) {
    const auto [end, error] = std::from_chars(input.data(), input.data() + newline, blobSize);
    if (error == std::errc{} && end == input.data() + newline)
      input.remove_prefix(newline + 1);
    else
      blobSize = 0;
  }
  try {
    const auto table = image::parseChunkTableConfig(input, blobSize);
    if (!table) return 0;
    std::uint64_t covered = 0;
    for (std::uint64_t i = 0; i < table->chunkCount(); ++i) {
      const std::uint64_t length = table->chunkLength(i);
      if (length == 0 || length > table->chunkSize || table->chunkOffset(i) != covered) __builtin_trap();
      covered += length;
    }
    if (covered != blobSize || table->chunkLength(table->chunkCount()) != 0) __builtin_trap();
    // A chunk of the input's own bytes: a digest is taken only when the length is right.
    if (table->chunkCount() > 0) (void)table->matches(0, data, size);
    const auto again = image::parseChunkTableConfig(image::chunkTableConfig(*table), blobSize);
    if (!again || again->chunkSize != table->chunkSize || again->size != table->size ||
        again->digests != table->digests)
      __builtin_trap();
  } catch (const ctr::Error&) {
  }
  // The same text as a table served beside an image on a web server (ctr sif chunks): refused
  // with ctr::Error or accepted whole, and printed back to the same digest and table.
  try {
    const auto served = image::parseUrlChunkTable(input);
    const auto again = image::parseUrlChunkTable(image::urlChunkTable(served.digest, served.table));
    if (again.digest != served.digest || again.table.size != served.table.size ||
        again.table.digests != served.table.digests)
      __builtin_trap();
  } catch (const ctr::Error&) {
  }
  return 0;
}
