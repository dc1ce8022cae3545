// glibc's ld.so cache, its two on-disk layouts (glibc sysdeps/generic/dl-cache.h and the
// writer, elf/cache.c save_cache), and the selection of driver libraries from it.
#include "ctr/ldcache.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <array>
#include <bit>
#include <cstring>
#include <set>

#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/pathutil.hpp"
#include "ctr/strings.hpp"

namespace ctr::host {
namespace {

constexpr std::string_view kOldMagic = "ld.so-1.7.0";
constexpr std::string_view kNewMagic = "glibc-ld.so.cache1.1";  // magic and version

// struct cache_file: 11-byte magic padded to 12, then uint32 nlibs; 12-byte file_entry.
constexpr std::size_t kOldHeaderSize = 16;
constexpr std::size_t kOldEntrySize = 12;
// struct cache_file_new (48 bytes) and file_entry_new (24 bytes).
constexpr std::size_t kNewHeaderSize = 48;
constexpr std::size_t kNewEntrySize = 24;
constexpr std::size_t kNewNlibsAt = 20, kNewLenStringsAt = 24, kNewFlagsAt = 28,
                      kNewExtensionAt = 32;
// The embedded new table starts at the old table's end rounded up to
// alignof(cache_file_new); ldconfig -c compat makes the old count even so that this is
// the same on every architecture.
constexpr std::size_t kNewAlign = 8;

constexpr std::uint8_t kEndianMask = 3, kEndianInvalid = 1, kEndianLittle = 2, kEndianBig = 3;
constexpr std::uint8_t kEndianHost =
    std::endian::native == std::endian::little ? kEndianLittle : kEndianBig;

constexpr std::uint32_t kExtensionMagic = static_cast<std::uint32_t>(-358342284);
constexpr std::uint32_t kExtensionTagGenerator = 0, kExtensionTagHwcaps = 1;
constexpr std::size_t kExtensionHeaderSize = 8, kExtensionSectionSize = 16;
// hwcap: bit 62 alone (ignoring the ISA level bits 32..41) marks an index into the
// glibc-hwcaps section in the low 32 bits (dl_cache_hwcap_extension).
constexpr std::uint64_t kHwcapExtension = 1ULL << 62;
constexpr std::uint64_t kHwcapIsaLevelMask = (1ULL << 10) - 1;

constexpr std::size_t kMaxCacheSize = 64u << 20;

// Bounds-checked little reads from the cache bytes; every failure names the file.
class CacheBytes {
 public:
  CacheBytes(std::span<const std::byte> bytes, const std::string& what)
      : bytes_(bytes), what_(what) {}

  [[nodiscard]] std::size_t size() const { return bytes_.size(); }

  [[noreturn]] void fail(const std::string& problem) const { throw Error(what_ + ": " + problem); }

  // Whether [offset, offset + length) lies inside the file, without overflow.
  [[nodiscard]] bool fits(std::uint64_t offset, std::uint64_t length) const {
    return offset <= bytes_.size() && length <= bytes_.size() - offset;
  }

  [[nodiscard]] bool startsWith(std::size_t offset, std::string_view magic) const {
    return fits(offset, magic.size()) &&
           std::memcmp(bytes_.data() + offset, magic.data(), magic.size()) == 0;
  }

  template <typename T>
  [[nodiscard]] T read(std::uint64_t offset, std::string_view field) const {
    if (!fits(offset, sizeof(T)))
      fail("truncated: " + std::string(field) + " at offset " + std::to_string(offset) +
           " is past the end (" + std::to_string(bytes_.size()) + " bytes)");
    T value;
    std::memcpy(&value, bytes_.data() + offset, sizeof(T));
    return value;
  }

  // The NUL-terminated string at `offset`, which must end before `limit`.
  [[nodiscard]] std::string stringAt(std::uint64_t offset, std::uint64_t limit,
                                     std::string_view field) const {
    if (limit > bytes_.size()) limit = bytes_.size();
    if (offset >= limit)
      fail(std::string(field) + " at offset " + std::to_string(offset) +
           " is outside the string table");
    const auto* begin = reinterpret_cast<const char*>(bytes_.data()) + offset;
    const void* nul = std::memchr(begin, '\0', limit - offset);
    if (nul == nullptr)
      fail(std::string(field) + " at offset " + std::to_string(offset) + " is not terminated");
    return {begin, static_cast<const char*>(nul)};
  }

  [[nodiscard]] std::string_view textAt(std::uint64_t offset, std::uint64_t length) const {
    return {reinterpret_cast<const char*>(bytes_.data()) + offset, length};
  }

 private:
  std::span<const std::byte> bytes_;
  const std::string& what_;
};

struct Extensions {
  std::string generator;
  std::uint64_t hwcapsOffset = 0;  // of the uint32 array; 0 when absent
  std::uint32_t hwcapsCount = 0;
};

// The extension directory of a new-format table (cache_extension_load): a malformed one is
// an error, as `ldconfig -p` treats it; an unknown tag is skipped.
Extensions readExtensions(const CacheBytes& in, std::uint32_t directory) {
  Extensions ext;
  if (directory == 0) return ext;
  if (directory % 4 != 0)
    in.fail("extension directory offset " + std::to_string(directory) + " is not 4-aligned");
  if (in.read<std::uint32_t>(directory, "extension magic") != kExtensionMagic)
    in.fail("bad extension magic at offset " + std::to_string(directory));
  const auto count = in.read<std::uint32_t>(directory + 4, "extension count");
  const std::uint64_t sections = std::uint64_t{directory} + kExtensionHeaderSize;
  if (!in.fits(sections, std::uint64_t{count} * kExtensionSectionSize))
    in.fail("truncated: " + std::to_string(count) + " extension sections do not fit");
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::uint64_t at = sections + std::uint64_t{i} * kExtensionSectionSize;
    const auto tag = in.read<std::uint32_t>(at, "extension tag");
    const auto offset = in.read<std::uint32_t>(at + 8, "extension offset");
    const auto size = in.read<std::uint32_t>(at + 12, "extension size");
    if (!in.fits(offset, size))
      in.fail("extension section " + std::to_string(i) + " (offset " + std::to_string(offset) +
              ", " + std::to_string(size) + " bytes) is past the end");
    if (tag == kExtensionTagGenerator) {
      ext.generator = std::string(in.textAt(offset, size));
    } else if (tag == kExtensionTagHwcaps && size != 0 && size % 4 == 0 && offset % 4 == 0) {
      // Otherwise ignored, as cache_extension_verify does.
      ext.hwcapsOffset = offset;
      ext.hwcapsCount = size / 4;
    }
  }
  return ext;
}

// The glibc-hwcaps subdirectory an entry's hwcap names, or "". Its string index counts from
// the new table's header, as ldconfig writes it (save_cache: str_offset). ld.so and
// `ldconfig -p` count from the start of the file, the same place except in a compat file,
// where they read a wrong name (glibc 2.36 prints garbage there).
std::string hwcapsName(const CacheBytes& in, std::size_t base, const Extensions& ext,
                       std::uint64_t hwcap) {
  if (((hwcap >> 32) & ~kHwcapIsaLevelMask) != (kHwcapExtension >> 32)) return {};
  const auto index = static_cast<std::uint32_t>(hwcap);
  if (ext.hwcapsOffset == 0 || index >= ext.hwcapsCount) return {};
  const auto string = in.read<std::uint32_t>(ext.hwcapsOffset + std::uint64_t{index} * 4,
                                             "glibc-hwcaps index");
  return in.stringAt(base + std::uint64_t{string}, in.size(), "glibc-hwcaps name");
}

void parseNewTable(const CacheBytes& in, std::size_t base, LdCache& cache) {
  if (!in.fits(base, kNewHeaderSize)) in.fail("truncated: the header is cut short");
  const auto endian = in.read<std::uint8_t>(base + kNewFlagsAt, "flags") & kEndianMask;
  if (endian == kEndianInvalid) in.fail("marked invalid by ldconfig");
  if (endian != 0 && endian != kEndianHost)
    in.fail(std::string("written for a ") + (endian == kEndianBig ? "big" : "little") +
            "-endian machine");
  const auto nlibs = in.read<std::uint32_t>(base + kNewNlibsAt, "entry count");
  const auto lenStrings = in.read<std::uint32_t>(base + kNewLenStringsAt, "string table size");
  const std::uint64_t entries = base + kNewHeaderSize;
  const std::uint64_t strings = entries + std::uint64_t{nlibs} * kNewEntrySize;
  if (!in.fits(entries, std::uint64_t{nlibs} * kNewEntrySize))
    in.fail("truncated: " + std::to_string(nlibs) + " entries do not fit in " +
            std::to_string(in.size()) + " bytes");
  if (!in.fits(strings, lenStrings))
    in.fail("truncated: the string table (" + std::to_string(lenStrings) +
            " bytes at offset " + std::to_string(strings) + ") is past the end");
  const Extensions ext =
      readExtensions(in, in.read<std::uint32_t>(base + kNewExtensionAt, "extension offset"));
  cache.generator = ext.generator;

  // String indices count from the new header; keep them inside the string table.
  const std::uint64_t stringsEnd = strings + lenStrings;
  cache.entries.reserve(nlibs);
  for (std::uint32_t i = 0; i < nlibs; ++i) {
    const std::uint64_t at = entries + std::uint64_t{i} * kNewEntrySize;
    LdCacheEntry e;
    e.flags = in.read<std::int32_t>(at, "entry flags");
    const auto key = in.read<std::uint32_t>(at + 4, "entry key");
    const auto value = in.read<std::uint32_t>(at + 8, "entry value");
    e.osVersion = in.read<std::uint32_t>(at + 12, "entry OS version");
    e.hwcap = in.read<std::uint64_t>(at + 16, "entry hwcap");
    if (base + std::uint64_t{key} < strings || base + std::uint64_t{value} < strings)
      in.fail("entry " + std::to_string(i) + " points before the string table");
    e.soname = in.stringAt(base + std::uint64_t{key}, stringsEnd, "entry " + std::to_string(i) + " name");
    e.path = in.stringAt(base + std::uint64_t{value}, stringsEnd, "entry " + std::to_string(i) + " path");
    e.hwcapsName = hwcapsName(in, base, ext, e.hwcap);
    cache.entries.push_back(std::move(e));
  }
}

void parseOldTable(const CacheBytes& in, std::uint32_t nlibs, LdCache& cache) {
  // Strings count from the end of the old table and run to the end of the file.
  const std::uint64_t strings = kOldHeaderSize + std::uint64_t{nlibs} * kOldEntrySize;
  cache.entries.reserve(nlibs);
  for (std::uint32_t i = 0; i < nlibs; ++i) {
    const std::uint64_t at = kOldHeaderSize + std::uint64_t{i} * kOldEntrySize;
    LdCacheEntry e;
    e.flags = in.read<std::int32_t>(at, "entry flags");
    const auto key = in.read<std::uint32_t>(at + 4, "entry key");
    const auto value = in.read<std::uint32_t>(at + 8, "entry value");
    e.soname = in.stringAt(strings + key, in.size(), "entry " + std::to_string(i) + " name");
    e.path = in.stringAt(strings + value, in.size(), "entry " + std::to_string(i) + " path");
    cache.entries.push_back(std::move(e));
  }
}

// The glibc-hwcaps subdirectory of an entry: from its hwcap, or, in the old layout, which
// has none, from its path (".../glibc-hwcaps/x86-64-v3/libfoo.so.1").
std::string hwcapsVariant(const LdCacheEntry& e) {
  if (!e.hwcapsName.empty()) return e.hwcapsName;
  constexpr std::string_view dir = "/glibc-hwcaps/";
  const auto at = e.path.find(dir);
  if (at == std::string::npos) return {};
  const auto begin = at + dir.size();
  const auto end = e.path.find('/', begin);
  return end == std::string::npos ? std::string() : e.path.substr(begin, end - begin);
}

}  // namespace

LdCache parseLdCache(std::span<const std::byte> bytes, const std::string& what) {
  const CacheBytes in(bytes, what);
  LdCache cache;
  if (in.startsWith(0, kNewMagic)) {
    cache.format = LdCacheFormat::New;
    parseNewTable(in, 0, cache);
    return cache;
  }
  if (!in.startsWith(0, kOldMagic))
    in.fail(bytes.size() < kOldMagic.size() ? "truncated: too short for an ld.so cache header"
                                            : "not an ld.so cache (unknown magic)");
  const auto nlibs = in.read<std::uint32_t>(kOldMagic.size() + 1, "entry count");
  if (!in.fits(kOldHeaderSize, std::uint64_t{nlibs} * kOldEntrySize))
    in.fail("truncated: " + std::to_string(nlibs) + " entries do not fit in " +
            std::to_string(in.size()) + " bytes");
  const std::uint64_t oldEnd = kOldHeaderSize + std::uint64_t{nlibs} * kOldEntrySize;
  const std::uint64_t embedded = (oldEnd + kNewAlign - 1) / kNewAlign * kNewAlign;
  if (in.startsWith(embedded, kNewMagic)) {
    cache.format = LdCacheFormat::Compat;
    parseNewTable(in, embedded, cache);
  } else {
    cache.format = LdCacheFormat::Old;
    parseOldTable(in, nlibs, cache);
  }
  return cache;
}

LdCache readLdCache(const std::string& path) {
  const std::string what = "ld.so cache " + path;
  const std::string text = readCheckedFile(path, kMaxCacheSize, what);
  return parseLdCache(std::as_bytes(std::span(text)), what);
}

std::string describeLdCacheFlags(std::int32_t flags) {
  constexpr std::array<const char*, 4> types{"libc4", "ELF", "libc5", "libc6"};
  const auto type = static_cast<std::size_t>(flags & kLdFlagTypeMask);
  std::string out = type < types.size() ? types[type] : "unknown or unsupported flag";
  switch (flags & kLdFlagRequiredMask) {
    case 0: break;
    case kLdFlagX8664Lib64: out += ",x86-64"; break;
    case kLdFlagSparcLib64:
    case kLdFlagS390Lib64:
    case kLdFlagPowerpcLib64:
    case 0x0700: out += ",64bit"; break;  // MIPS n64
    case 0x0600: out += ",N32"; break;
    case kLdFlagX8664LibX32: out += ",x32"; break;
    case kLdFlagArmLibHf: out += ",hard-float"; break;
    case kLdFlagAarch64Lib64: out += ",AArch64"; break;
    case kLdFlagArmLibSf:
    case kLdFlagRiscvFloatAbiSoft:
    case kLdFlagLarchFloatAbiSoft: out += ",soft-float"; break;
    case 0x0c00: out += ",nan2008"; break;
    case 0x0d00: out += ",N32,nan2008"; break;
    case 0x0e00: out += ",64bit,nan2008"; break;
    case kLdFlagRiscvFloatAbiDouble:
    case kLdFlagLarchFloatAbiDouble: out += ",double-float"; break;
    default: out += "," + std::to_string(flags & kLdFlagRequiredMask); break;
  }
  return out;
}

std::string describe(ElfIdentity identity) {
  std::string out = identity.elfClass == ELFCLASS64   ? "ELF64"
                    : identity.elfClass == ELFCLASS32 ? "ELF32"
                                                      : "ELF class " + std::to_string(identity.elfClass);
  switch (identity.machine) {
    case EM_386: return out + " i386";
    case EM_X86_64: return out + " x86-64";
    case EM_AARCH64: return out + " AArch64";
    case EM_ARM: return out + " ARM";
    case EM_PPC64: return out + (identity.byteOrder == ELFDATA2LSB ? " PowerPC64le" : " PowerPC64");
    case EM_S390: return out + " s390";
    case EM_RISCV: return out + " RISC-V";
    default: return out + " machine " + std::to_string(identity.machine);
  }
}

ElfIdentity elfClassAndMachine(const std::string& path) {
  // O_NONBLOCK: a FIFO planted where a library should be cannot hang the open.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (!fd) throw sysError("cannot open " + path + " to read its ELF header");
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw sysError("fstat " + path);
  if (!S_ISREG(st.st_mode)) throw Error(path + " is " + fileTypeName(st.st_mode) + ", not an ELF file");
  // e_ident (16 bytes), e_type, e_machine: the same offsets in both classes.
  std::array<unsigned char, EI_NIDENT + 4> header{};
  if (readAt(fd.get(), 0, std::span<unsigned char>(header)) != header.size() ||
      std::memcmp(header.data(), ELFMAG, SELFMAG) != 0)
    throw Error(path + " is not an ELF file");
  ElfIdentity id{header[EI_CLASS], header[EI_DATA], 0};
  if ((id.elfClass != ELFCLASS32 && id.elfClass != ELFCLASS64) ||
      (id.byteOrder != ELFDATA2LSB && id.byteOrder != ELFDATA2MSB))
    throw Error(path + " has an unknown ELF class or byte order");
  const unsigned lo = header[EI_NIDENT + 2], hi = header[EI_NIDENT + 3];
  id.machine = static_cast<std::uint16_t>(id.byteOrder == ELFDATA2LSB ? lo | hi << 8 : hi | lo << 8);
  return id;
}

ElfIdentity hostElfIdentity() {
  static const ElfIdentity self = elfClassAndMachine("/proc/self/exe");
  return self;
}

std::optional<std::int32_t> ldCacheFlagsFor(ElfIdentity identity) {
  const bool is64 = identity.elfClass == ELFCLASS64;
  switch (identity.machine) {
    case EM_X86_64: return kLdFlagElfLibc6 | (is64 ? kLdFlagX8664Lib64 : kLdFlagX8664LibX32);
    case EM_386: return is64 ? std::nullopt : std::optional(kLdFlagElfLibc6);
    case EM_AARCH64: return is64 ? std::optional(kLdFlagElfLibc6 | kLdFlagAarch64Lib64) : std::nullopt;
    case EM_PPC64: return is64 ? std::optional(kLdFlagElfLibc6 | kLdFlagPowerpcLib64) : std::nullopt;
    case EM_S390: return kLdFlagElfLibc6 | (is64 ? kLdFlagS390Lib64 : 0);
    default: return std::nullopt;
  }
}

LibraryList parseLibraryList(std::string_view text, const std::string& what) {
  LibraryList list;
  std::set<std::string, std::less<>> seen;
  for (const ConfigLine& line : configLines(text)) {
    const std::string_view name = line.text;
    auto fail = [&](const std::string& problem) {
      throw Error(what + ":" + std::to_string(line.number) + ": " + problem);
    };
    if (name.find_first_of(" \t") != std::string_view::npos)
      fail("one name per line, got '" + std::string(name) + "'");
    if (!seen.insert(std::string(name)).second) continue;
    if (name.front() == '/') {
      list.files.emplace_back(name);
    } else if (name.find('/') != std::string_view::npos) {
      fail("'" + std::string(name) + "' is neither a bare name nor an absolute path");
    } else if (name.ends_with(".so") || name.find(".so.") != std::string_view::npos) {
      list.libraries.emplace_back(name);
    } else {
      list.binaries.emplace_back(name);
    }
  }
  return list;
}

LibraryList readLibraryList(const std::string& path) {
  return parseLibraryList(readCheckedFile(path, 1u << 20, "library list " + path), path);
}

LibrarySelection selectLibraries(const LdCache& cache, std::span<const std::string> listed,
                                 ElfIdentity host, const std::string& root) {
  LibrarySelection out;
  const std::optional<std::int32_t> hostFlags = ldCacheFlagsFor(host);
  std::set<std::string, std::less<>> chosen;   // sonames with a selected entry
  std::set<std::string, std::less<>> visited;  // sonames already looked at via another name
  for (const std::string& name : listed) {
    bool matched = false;
    std::set<std::string, std::less<>> mine;  // sonames this name reached first
    for (const LdCacheEntry& e : cache.entries) {
      const std::string_view soname = e.soname;
      if (!(soname == name || (soname.starts_with(name) && soname[name.size()] == '.'))) continue;
      matched = true;
      if (visited.contains(soname) && !mine.contains(soname)) continue;
      visited.insert(e.soname);
      mine.insert(e.soname);
      auto skip = [&](std::string reason) {
        out.skipped.push_back({name, e.soname, e.path, std::move(reason)});
      };
      // ld.so takes an entry with its own flags or plain "ELF" (_dl_cache_check_flags):
      // ldconfig gives that to a library that needs no libc (ld-linux.so.2), whatever its
      // machine, so only the ELF header below can tell.
      if ((e.flags & kLdFlagTypeMask) != kLdFlagElfLibc6 && e.flags != kLdFlagElf) {
        skip("not a glibc library (" + describeLdCacheFlags(e.flags) + ")");
      } else if (hostFlags && e.flags != *hostFlags && e.flags != kLdFlagElf) {
        skip("built for " + describeLdCacheFlags(e.flags) + ", not " +
             describeLdCacheFlags(*hostFlags));
      } else if (const std::string variant = hwcapsVariant(e); !variant.empty()) {
        skip("a glibc-hwcaps/" + variant + " build; the baseline one is used");
      } else if (e.hwcap != 0) {
        skip("a legacy hwcap build, which ld.so ignores since glibc 2.37");
      } else if (chosen.contains(soname)) {
        skip("an earlier entry for " + e.soname + " comes first");
      } else if (e.path.empty() || e.path.front() != '/') {
        skip("its path is not absolute");
      } else {
        const std::string path = joinPath(root, e.path);
        try {
          if (const ElfIdentity found = elfClassAndMachine(path); found != host) {
            skip("its ELF header says " + describe(found) + ", not " + describe(host) +
                 " (the cache says " + describeLdCacheFlags(e.flags) + ")");
            continue;
          }
        } catch (const Error& err) {
          skip(err.oneLine());
          continue;
        }
        chosen.insert(e.soname);
        out.selected.push_back({name, e.soname, path, e.flags});
      }
    }
    if (!matched) out.skipped.push_back({name, "", "", "not in the ld.so cache"});
  }
  return out;
}

}  // namespace ctr::host
