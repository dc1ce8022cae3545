// The host's driver libraries for --nv (and later --rocm), found without running ldconfig:
// glibc's on-disk ld.so cache read directly, filtered by an admin-editable list
// (etc/nvliblist.conf) and by ELF class and machine (issue 8). Plain data only: the planner
// turns a selection into mounts.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ctr::host {

// Entry flags as ldconfig writes them (glibc sysdeps/generic/ldconfig.h): the low byte is
// the library type, the high byte the ABI it needs.
inline constexpr std::int32_t kLdFlagTypeMask = 0x00ff;
inline constexpr std::int32_t kLdFlagElf = 0x0001;  // no libc dependency, any machine
inline constexpr std::int32_t kLdFlagElfLibc6 = 0x0003;
inline constexpr std::int32_t kLdFlagRequiredMask = 0xff00;
inline constexpr std::int32_t kLdFlagSparcLib64 = 0x0100;
inline constexpr std::int32_t kLdFlagX8664Lib64 = 0x0300;
inline constexpr std::int32_t kLdFlagS390Lib64 = 0x0400;
inline constexpr std::int32_t kLdFlagPowerpcLib64 = 0x0500;
inline constexpr std::int32_t kLdFlagX8664LibX32 = 0x0800;
inline constexpr std::int32_t kLdFlagArmLibHf = 0x0900;
inline constexpr std::int32_t kLdFlagAarch64Lib64 = 0x0a00;
inline constexpr std::int32_t kLdFlagArmLibSf = 0x0b00;
inline constexpr std::int32_t kLdFlagRiscvFloatAbiSoft = 0x0f00;
inline constexpr std::int32_t kLdFlagRiscvFloatAbiDouble = 0x1000;
inline constexpr std::int32_t kLdFlagLarchFloatAbiSoft = 0x1100;
inline constexpr std::int32_t kLdFlagLarchFloatAbiDouble = 0x1200;

struct LdCacheEntry {
  std::string soname;  // the key ld.so looks up: "libcuda.so.1"
  std::string path;    // where it is: "/usr/lib/x86_64-linux-gnu/libcuda.so.1"
  std::int32_t flags = 0;
  std::uint32_t osVersion = 0;  // new format only; unused by glibc since 2.33
  std::uint64_t hwcap = 0;      // new format only; 0 for a baseline build
  // The glibc-hwcaps subdirectory ("x86-64-v3") when `hwcap` names one, else "".
  std::string hwcapsName;

  friend bool operator==(const LdCacheEntry&, const LdCacheEntry&) = default;
};

enum class LdCacheFormat {
  Old,     // "ld.so-1.7.0" alone (ldconfig -c old)
  Compat,  // "ld.so-1.7.0" with "glibc-ld.so.cache1.1" embedded after it (-c compat)
  New,     // "glibc-ld.so.cache1.1" alone (-c new, the default since glibc 2.32)
};

struct LdCache {
  LdCacheFormat format = LdCacheFormat::New;
  // In file order, which is ldconfig's order of preference: for one soname, the entry ld.so
  // would pick for an ABI comes before later ones for that ABI.
  std::vector<LdCacheEntry> entries;
  std::string generator;  // "ldconfig (Debian GLIBC 2.36-9) stable release version 2.36", or ""
};

// Parses the bytes of an ld.so cache. Refuses a truncated or inconsistent file with a
// one-line ctr::Error "<what>: <what is wrong>"; never reads outside `bytes`. Of a compat
// file the embedded new table is read, as ld.so does.
[[nodiscard]] LdCache parseLdCache(std::span<const std::byte> bytes, const std::string& what);

// Reads and parses the cache at `path` (a regular file of at most 64 MiB).
[[nodiscard]] LdCache readLdCache(const std::string& path);

// "libc6,x86-64": the flags as `ldconfig -p` prints them.
[[nodiscard]] std::string describeLdCacheFlags(std::int32_t flags);

// The ABI an ELF file is built for, from its header.
struct ElfIdentity {
  std::uint8_t elfClass = 0;   // ELFCLASS32 or ELFCLASS64
  std::uint8_t byteOrder = 0;  // ELFDATA2LSB or ELFDATA2MSB
  std::uint16_t machine = 0;   // EM_X86_64, EM_AARCH64, ...

  friend auto operator<=>(const ElfIdentity&, const ElfIdentity&) = default;
};

// "ELF64 x86-64", "ELF32 i386".
[[nodiscard]] std::string describe(ElfIdentity identity);

// The class, byte order and machine in the ELF header of the regular file at `path` (one
// bounded read of its first 20 bytes). Throws ctr::Error naming the path when it cannot be
// read or is not ELF.
[[nodiscard]] ElfIdentity elfClassAndMachine(const std::string& path);

// The identity of the running ctr, which is the ABI of the host it runs on.
[[nodiscard]] ElfIdentity hostElfIdentity();

// The cache flags ldconfig gives a library of `identity`, where they follow from the class
// and machine alone (not for 32-bit ARM or RISC-V, whose float ABI is not in the header).
[[nodiscard]] std::optional<std::int32_t> ldCacheFlagsFor(ElfIdentity identity);

// An admin-editable list of what to inject (etc/nvliblist.conf): one name per line, '#'
// comments. A name ending in ".so" (or a versioned "libX.so.1") is a library looked up in
// the ld.so cache; an absolute path is a file bound as it is (Vulkan/EGL ICD files); any
// other name is a program looked up on the host's PATH.
struct LibraryList {
  std::vector<std::string> libraries;
  std::vector<std::string> binaries;
  std::vector<std::string> files;
};

// Refuses a name with blanks or a relative path in it ("<what>:LINE: ..."). A repeated name
// counts once.
[[nodiscard]] LibraryList parseLibraryList(std::string_view text, const std::string& what);
[[nodiscard]] LibraryList readLibraryList(const std::string& path);

struct SelectedLibrary {
  std::string listed;  // the name in the list: "libcuda.so"
  std::string soname;  // the cache key it matched: "libcuda.so.1"
  std::string path;    // the host file: "/usr/lib/x86_64-linux-gnu/libcuda.so.1" (under root)
  std::int32_t flags = 0;
};

struct SkippedLibrary {
  std::string listed;
  std::string soname;  // "" when nothing in the cache matched `listed`
  std::string path;    // likewise
  std::string reason;  // "not in the ld.so cache", "built for libc6 (ELF32), not ..."
};

struct LibrarySelection {
  std::vector<SelectedLibrary> selected;  // in list order, then cache order
  std::vector<SkippedLibrary> skipped;
};

// For each library of `listed`, the cache entries whose soname is that name or that name
// followed by '.' ("libcuda.so" matches "libcuda.so" and "libcuda.so.1"); of each soname,
// the first entry (in ldconfig's order) built for `host`: its flags must be those of
// `host` (or plain "ELF", as ld.so accepts) and its file's ELF header must say `host` too, since a cache can be stale or
// wrong. Baseline builds only: glibc-hwcaps variants are skipped, as the container gets one
// file per name. Cache paths are read under `root` ("/" on a real host; a fixture tree in
// tests), and the selected path is the one under `root`.
[[nodiscard]] LibrarySelection selectLibraries(const LdCache& cache,
                                               std::span<const std::string> listed,
                                               ElfIdentity host, const std::string& root = "/");

}  // namespace ctr::host
