// The host's MPI as `ctr exec --mpi=bind` injects it (issue 8, item 4): the libraries the
// admin names in ctr.conf ('mpi library'), their dependencies (DT_NEEDED, resolved through
// the host's ld.so cache), configuration files and directories ('mpi path'), and the
// fabric's plugins and configuration when the host has them (rdma-core providers,
// /etc/libibverbs.d, UCX and libfabric). Plain data: the planner turns it into mounts; the
// launch compares each library with the image's library of the same soname (checkMpiAbi)
// and binds the host's over it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace ctr::host {

// The ABI an MPI library's soname promises. Open MPI 3.0-5.x: libmpi.so.40 (2.x: .20);
// the MPICH ABI (MPICH >= 3.1, Intel MPI, Cray MPICH, MVAPICH): libmpi.so.12 and
// libmpich.so.12. The two are never mixed.
enum class MpiFamily { Unknown, OpenMpi, Mpich };

// "Open MPI", "MPICH ABI", "unknown".
[[nodiscard]] std::string toString(MpiFamily family);

// The family of a library by its soname or file name: libmpich.so.* and libmpi.so.12* are
// the MPICH ABI, other libmpi.so.N Open MPI; anything else Unknown.
[[nodiscard]] MpiFamily mpiFamilyOf(std::string_view name);

// A shared library's name split as the ABI check reads it: "libmpi.so.40.30.4" ->
// stem "libmpi.so", numbers {40, 30, 4}. nullopt when the name has no ".so" or a
// non-numeric part after it.
struct LibraryVersion {
  std::string stem;
  std::vector<int> numbers;  // major, minor, patch as present
  [[nodiscard]] int majorNumber() const { return numbers.empty() ? -1 : numbers[0]; }
  [[nodiscard]] int minorNumber() const { return numbers.size() < 2 ? 0 : numbers[1]; }  // absent = 0 (as Sarus)
};
[[nodiscard]] std::optional<LibraryVersion> parseLibraryVersion(std::string_view fileName);

// "40.30.4" (or "" for none).
[[nodiscard]] std::string versionText(const LibraryVersion& version);

// ctr.conf 'mpi abi check'. strict: same major, and the host's minor at least the image's
// (a backward replacement is refused). relaxed: same major; a backward replacement is
// allowed with a warning (Sarus's default 'major' and its 'full').
enum class MpiAbiCheck { Strict, Relaxed };

[[nodiscard]] std::string toString(MpiAbiCheck mode);

struct MpiAbiVerdict {
  bool compatible = false;
  std::string message;  // why not (compatible = false), or a warning ("" when none)
};

// Compares the real file names of the host's and the image's library of one soname
// ("libmpi.so.40.30.4" with "libmpi.so.40.20.1"). The families must agree, the stems and the
// majors must be equal (a name without a major is refused), and in strict mode the host's
// minor must be >= the image's. Messages name both files and versions.
[[nodiscard]] MpiAbiVerdict checkMpiAbi(std::string_view hostFile, std::string_view imageFile, MpiAbiCheck mode);

// One host library the container gets.
struct MpiLibrary {
  std::string soname;  // "libmpi.so.40"
  std::string path;    // the host file (under root), its real path: ".../libmpi.so.40.30.4"
  std::string from;    // provenance, for --explain ("ctr.conf 'mpi library' libmpi.so.40: ld.so cache (libc6,x86-64)")
  friend bool operator==(const MpiLibrary&, const MpiLibrary&) = default;
};

// A file or directory bound at the same path in the container.
struct MpiPath {
  std::string path;  // as the container sees it
  std::string from;
  friend bool operator==(const MpiPath&, const MpiPath&) = default;
};

struct HostMpi {
  MpiFamily family = MpiFamily::Unknown;  // of the first library of a known family
  std::vector<MpiLibrary> libraries;      // 'mpi library': each replaces the image's of its soname
  std::vector<MpiLibrary> dependencies;   // their DT_NEEDED closure and 'mpi dependency'
  std::vector<MpiPath> paths;             // 'mpi path' and the fabric's that exist
  std::vector<std::string> skipped;       // what was not injected, with why
  std::string needsGlibc;                 // the highest GLIBC_x.y the injected libraries need
  std::string needsGlibcLibrary;
  std::string root = "/";                 // where the host's files are (a fixture tree in tests)
  bool fromCache = false;                 // read from the state directory's scan cache
};

struct MpiScanInputs {
  std::string root = "/";
  std::string ldCache = "/etc/ld.so.cache";
  std::vector<std::string> libraries;     // sonames ("libmpi.so.40") or absolute paths
  std::vector<std::string> dependencies;  // likewise; dlopen'd libraries ld.so cannot see
  std::vector<std::string> paths;         // absolute paths
  std::string cacheDir;                   // the user's state directory; empty = no cache
};

// Resolves the configured host MPI. Throws a one-line ctr::Error when no library is
// configured, a configured library is not on the host, or the libraries mix families.
// Plugins in the 'mpi path' directories (dlopen'd components) count with their DT_NEEDED.
// With `cacheDir`, the result is kept there (mpi-scan-<key>.json), keyed by the host's ld.so
// cache identity, the configuration and the identity of each configured path, so a launch
// on a node that scanned before reads one file (a scan of Debian's Open MPI with its
// components reads some 200 ELF files, ~8 ms).
[[nodiscard]] HostMpi scanHostMpi(const MpiScanInputs& inputs);

// The libraries the image's own ld.so knows: its ld.so cache, then these directories.
inline constexpr std::string_view kImageLibraryDirs[] = {
    "/usr/local/lib", "/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
    "/lib/aarch64-linux-gnu", "/usr/lib64", "/lib64", "/usr/lib", "/lib"};

// A library found in an image (rootFd: the image's root directory).
struct ImageLibrary {
  std::string soname;
  std::string path;      // where ld.so finds it: "/usr/lib/x86_64-linux-gnu/libmpi.so.40"
  std::string realPath;  // every symlink followed inside the root: ".../libmpi.so.40.30.2"
  std::string how;       // "the image's ld.so cache", "/usr/lib64"
};

// The image's library of `soname`: its /etc/ld.so.cache's first entry for this machine,
// else the first of kImageLibraryDirs that has it. nullopt when the image has none.
[[nodiscard]] std::optional<ImageLibrary> findImageLibrary(int rootFd, const std::string& soname);

// The MPI libraries the image has (libmpi.so.*, libmpich.so.*), for an error that names
// what the image holds instead of the soname asked for.
[[nodiscard]] std::vector<ImageLibrary> findImageMpiLibraries(int rootFd);

[[nodiscard]] nlohmann::json toJson(const HostMpi& mpi);

}  // namespace ctr::host
