// Bind specs in Apptainer syntax: "src[:dst[:OPTIONS]]", several separated by commas, as
// given to --bind/-B (repeatable), in $CTR_BIND, or on a "bind path" line of ctr.conf.
// OPTIONS is a comma list of ro, rw and image-src=PATH (a dataset image: SRC is a squashfs
// or SIF file, PATH the directory of it to bind, read-only); "a:/d:image-src=/,ro" is one
// bind, as in Apptainer.
// Pure: nothing here looks at the file system; the runtime checks that sources exist and
// resolves destinations inside the image (ctr/pathutil.hpp: resolveInRoot).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ctr::launch {

struct BindSpec {
  std::string source;       // absolute host path, normalised
  std::string destination;  // absolute container path, normalised; defaults to source
  bool readOnly = false;    // ":ro"; ":rw" or nothing = read-write
  std::string imageSrc;     // image-src=PATH (absolute, normalised); empty: not an image

  bool operator==(const BindSpec&) const = default;
};

// Parses one value: "src[:dst[:ro|rw]]" or a comma-separated list of them (empty items
// are skipped, so "a,,b" and a trailing comma are fine). Paths are normalised ("//" and
// "/./" collapsed, trailing '/' dropped). Throws ctr::Error with one line naming the bad
// spec for: an empty or relative source, a relative destination, a destination that is "/"
// or has a ".." component, an option other than ro/rw/image-src=, a relative image-src,
// image-src with rw, or more than two colons.
// A ':' or ',' in a path is written '\\:' or '\\,' (as in Apptainer). With `cwd` (a user's
// bind: --bind, APPTAINER_BIND), a relative source is taken from there, as Apptainer does.
[[nodiscard]] std::vector<BindSpec> parseBindSpecs(std::string_view list, const std::string& cwd = {});

// One --mount value in Apptainer's (Docker's) CSV syntax:
// "type=bind,source=SRC,destination=DST[,readonly]" (src, dst, target and ro are accepted
// for the names; a field may be double-quoted). Only type=bind exists in ctr; any other
// type or field is refused by name.
[[nodiscard]] BindSpec parseMountSpec(std::string_view spec);

// "src:dst:ro" / "src:dst" (read-write) / "src:dst:image-src=/x", the form --explain prints.
[[nodiscard]] std::string toString(const BindSpec& bind);

}  // namespace ctr::launch
