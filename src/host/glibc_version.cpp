// Symbol-version sections of ELF files (ctr/glibc_version.hpp). Both classes, the host's
// byte order only (a file of the other order cannot be a library for this host anyway).
#include "ctr/glibc_version.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <cstring>
#include <span>
#include <vector>

#include "ctr/error.hpp"
#include "ctr/fd.hpp"

namespace ctr::host {
namespace {

struct Section {
  std::uint32_t type = 0, link = 0, info = 0;
  std::uint64_t offset = 0, size = 0;
};

class ElfFile {
 public:
  explicit ElfFile(const std::string& path) : path_(path), fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)) {
    if (!fd_) throw sysError("cannot open " + path);
    struct stat st {};
    if (::fstat(fd_.get(), &st) != 0 || !S_ISREG(st.st_mode)) throw Error(path + ": not a regular file");
    size_ = static_cast<std::uint64_t>(st.st_size);
    const auto ident = get<std::array<unsigned char, EI_NIDENT>>(0);
    if (std::memcmp(ident.data(), ELFMAG, SELFMAG) != 0) throw Error(path + ": not an ELF file");
    is64_ = ident[EI_CLASS] == ELFCLASS64;
    if (!is64_ && ident[EI_CLASS] != ELFCLASS32) throw Error(path + ": unknown ELF class");
    const bool little = ident[EI_DATA] == ELFDATA2LSB;
    if (little != (std::endian::native == std::endian::little)) throw Error(path + ": byte order of another machine");
    readSections();
  }

  // The versions of `kind` (verneed or verdef) named GLIBC_x.y, their maximum.
  std::optional<GlibcVersion> maxGlibc(std::uint32_t kind) const {
    std::optional<GlibcVersion> best;
    for (const Section& s : sections_) {
      if (s.type != kind || s.link >= sections_.size()) continue;
      const Section& strings = sections_[s.link];
      std::uint64_t at = s.offset;
      for (std::uint32_t n = 0; n < s.info; ++n) {  // sh_info: the number of entries
        if (kind == SHT_GNU_verneed) {
          const auto need = get<Elf64_Verneed>(at);  // same layout in both classes
          const bool fromLibc = name(strings, need.vn_file) == "libc.so.6";
          std::uint64_t aux = at + need.vn_aux;
          for (std::uint16_t k = 0; k < need.vn_cnt; ++k) {
            const auto a = get<Elf64_Vernaux>(aux);
            if (fromLibc) keep(best, parseGlibcVersionName(name(strings, a.vna_name)));
            if (a.vna_next == 0) break;
            aux += a.vna_next;
          }
          if (need.vn_next == 0) break;
          at += need.vn_next;
        } else {
          const auto def = get<Elf64_Verdef>(at);
          if (def.vd_cnt > 0) keep(best, parseGlibcVersionName(name(strings, get<Elf64_Verdaux>(at + def.vd_aux).vda_name)));
          if (def.vd_next == 0) break;
          at += def.vd_next;
        }
      }
    }
    return best;
  }

  // DT_NEEDED of the dynamic section, in order (the string table is the one sh_link names).
  std::vector<std::string> needed() const {
    std::vector<std::string> out;
    for (const Section& s : sections_) {
      if (s.type != SHT_DYNAMIC || s.link >= sections_.size()) continue;
      const Section& strings = sections_[s.link];
      const std::uint64_t entry = is64_ ? sizeof(Elf64_Dyn) : sizeof(Elf32_Dyn);
      for (std::uint64_t at = s.offset; at + entry <= s.offset + s.size && out.size() < 4096; at += entry) {
        std::int64_t tag = 0;
        std::uint64_t value = 0;
        if (is64_) {
          const auto d = get<Elf64_Dyn>(at);
          tag = d.d_tag, value = d.d_un.d_val;
        } else {
          const auto d = get<Elf32_Dyn>(at);
          tag = d.d_tag, value = d.d_un.d_val;
        }
        if (tag == DT_NULL) break;
        if (tag == DT_NEEDED) out.push_back(name(strings, value));
      }
    }
    return out;
  }

 private:
  // Read where needed (a driver library can be 100 MiB; its version sections are small).
  template <typename T>
  T get(std::uint64_t offset) const {
    if (offset > size_ || size_ - offset < sizeof(T))
      throw Error(path_ + ": ELF structure at offset " + std::to_string(offset) + " runs past the end of the file");
    T value;
    if (readAt(fd_.get(), static_cast<std::int64_t>(offset), std::as_writable_bytes(std::span(&value, 1))) != sizeof(T))
      throw Error(path_ + ": short read at offset " + std::to_string(offset));
    return value;
  }

  std::string name(const Section& strings, std::uint64_t index) const {
    if (index >= strings.size) throw Error(path_ + ": a name outside its string table");
    std::string out;
    std::array<char, 64> chunk{};
    for (std::uint64_t at = strings.offset + index; at < strings.offset + strings.size && out.size() < 4096; at += chunk.size()) {
      const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(chunk.size(), strings.offset + strings.size - at));
      const std::size_t got = readAt(fd_.get(), static_cast<std::int64_t>(at), std::as_writable_bytes(std::span(chunk.data(), want)));
      const std::size_t len = strnlen(chunk.data(), got);
      out.append(chunk.data(), len);
      if (len < got || got < want) break;
    }
    return out;
  }

  static void keep(std::optional<GlibcVersion>& best, std::optional<GlibcVersion> v) {
    if (v && (!best || *v > *best)) best = v;
  }

  template <typename Ehdr, typename Shdr>
  void readSectionsOf() {
    const auto eh = get<Ehdr>(0);
    if (eh.e_shoff == 0 || eh.e_shnum == 0) return;  // stripped of section headers
    if (eh.e_shentsize != sizeof(Shdr)) throw Error(path_ + ": unexpected section header size");
    for (std::uint16_t i = 0; i < eh.e_shnum; ++i) {
      const auto sh = get<Shdr>(eh.e_shoff + std::uint64_t{i} * sizeof(Shdr));
      sections_.push_back({sh.sh_type, sh.sh_link, sh.sh_info, sh.sh_offset, sh.sh_size});
      if (sh.sh_type == SHT_GNU_verneed || sh.sh_type == SHT_GNU_verdef || sh.sh_type == SHT_STRTAB ||
          sh.sh_type == SHT_DYNAMIC)
        if (sh.sh_offset > size_ || size_ - sh.sh_offset < sh.sh_size)
          throw Error(path_ + ": section " + std::to_string(i) + " runs past the end of the file");
    }
  }
  void readSections() {
    if (is64_) readSectionsOf<Elf64_Ehdr, Elf64_Shdr>();
    else readSectionsOf<Elf32_Ehdr, Elf32_Shdr>();
  }

  std::string path_;
  UniqueFd fd_;
  std::uint64_t size_ = 0;
  bool is64_ = true;
  std::vector<Section> sections_;
};

}  // namespace

std::string toString(GlibcVersion v) {
  return std::to_string(v.major) + "." + std::to_string(v.minor) + (v.patch ? "." + std::to_string(v.patch) : "");
}

std::optional<GlibcVersion> parseGlibcVersionName(const std::string& name) {
  if (!name.starts_with("GLIBC_")) return std::nullopt;
  GlibcVersion v;
  int* parts[] = {&v.major, &v.minor, &v.patch};
  std::size_t i = 6, part = 0;
  while (part < 3) {
    if (i >= name.size() || !std::isdigit(static_cast<unsigned char>(name[i]))) return std::nullopt;
    int n = 0;
    while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])) && n < 100000) n = n * 10 + (name[i++] - '0');
    *parts[part++] = n;
    if (i == name.size()) break;
    if (name[i++] != '.') return std::nullopt;
  }
  if (i != name.size() || part < 2) return std::nullopt;
  return v;
}

std::optional<GlibcVersion> glibcNeededBy(const std::string& path) { return ElfFile(path).maxGlibc(SHT_GNU_verneed); }

std::optional<GlibcVersion> glibcDefinedBy(const std::string& path) { return ElfFile(path).maxGlibc(SHT_GNU_verdef); }

std::vector<std::string> elfNeeded(const std::string& path) { return ElfFile(path).needed(); }

}  // namespace ctr::host
