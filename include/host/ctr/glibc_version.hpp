// Which glibc an ELF file needs, and which glibc a libc.so.6 is, from their symbol-version
// sections (ELF gABI "Symbol Versioning": .gnu.version_r lists the versions a file needs
// from each library, .gnu.version_d those a library defines). For --nv and --rocm: a host
// driver built against a newer glibc than the image's fails inside the container with a
// loader message nobody connects to the driver; ctr says it before the app starts (issue 8).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ctr::host {

// A glibc version as "2.34"; compared numerically (2.9 < 2.10).
struct GlibcVersion {
  int major = 0, minor = 0, patch = 0;
  friend auto operator<=>(const GlibcVersion&, const GlibcVersion&) = default;
};
[[nodiscard]] std::string toString(GlibcVersion version);
// "GLIBC_2.34" -> 2.34; nullopt for GLIBC_PRIVATE and other names.
[[nodiscard]] std::optional<GlibcVersion> parseGlibcVersionName(const std::string& name);

// The highest GLIBC_x.y the file at `path` needs from libc.so.6 (nullopt: none, or no
// version needs at all). Throws a one-line ctr::Error for a file that is not a sound ELF
// file (every offset is checked against the file size).
[[nodiscard]] std::optional<GlibcVersion> glibcNeededBy(const std::string& path);

// The highest GLIBC_x.y a libc.so.6 defines: the glibc it is.
[[nodiscard]] std::optional<GlibcVersion> glibcDefinedBy(const std::string& path);

// The sonames the file at `path` needs (its DT_NEEDED entries, in order), for the host MPI's
// dependencies (--mpi=bind). Throws a one-line ctr::Error for a file that is not sound ELF.
[[nodiscard]] std::vector<std::string> elfNeeded(const std::string& path);

}  // namespace ctr::host
