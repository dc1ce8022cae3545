// The ld.so cache reader, the library list and the selection of driver libraries for --nv
// (issue 8), against this machine's cache and `ldconfig -p`, and against caches ldconfig
// builds over fixture trees of hand-made ELF libraries.
#include <elf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/gpu.hpp"

#include <nlohmann/json.hpp>
#include "ctr/ldcache.hpp"
#include "ctr/run_process.hpp"
#include "platform_probes.hpp"

namespace {

using ctr::host::ElfIdentity;
using ctr::host::LdCache;
using ctr::host::LdCacheFormat;

std::string findLdconfig() {
  for (const char* p : {"/sbin/ldconfig", "/usr/sbin/ldconfig", "/usr/bin/ldconfig"})
    if (::access(p, X_OK) == 0) return p;
  return {};
}

std::span<const std::byte> bytesOf(const std::string& s) { return std::as_bytes(std::span(s)); }

std::string errorOf(const std::string& bytes) {
  try {
    (void)ctr::host::parseLdCache(bytesOf(bytes), "ld.so cache test");
  } catch (const ctr::Error& e) {
    return e.oneLine();
  }
  return "";
}

// A shared object that is nothing but an ELF header, a PT_DYNAMIC program header and a
// dynamic section naming its DT_SONAME: all ldconfig reads of a library.
template <typename Ehdr, typename Phdr, typename Dyn>
std::string fakeLibrary(unsigned char elfClass, std::uint16_t machine, const std::string& soname) {
  Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = elfClass;
  eh.e_ident[EI_DATA] = std::endian::native == std::endian::little ? ELFDATA2LSB : ELFDATA2MSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_DYN;
  eh.e_machine = machine;
  eh.e_version = EV_CURRENT;
  eh.e_phoff = sizeof(Ehdr);
  eh.e_ehsize = sizeof(Ehdr);
  eh.e_phentsize = sizeof(Phdr);
  eh.e_phnum = 1;
  const std::size_t dynAt = sizeof(Ehdr) + sizeof(Phdr);
  const std::size_t strAt = dynAt + 4 * sizeof(Dyn);
  Phdr ph{};
  ph.p_type = PT_DYNAMIC;
  ph.p_offset = ph.p_vaddr = ph.p_paddr = dynAt;
  ph.p_filesz = ph.p_memsz = 4 * sizeof(Dyn);
  // No PT_LOAD: ldconfig then reads DT_STRTAB as a file offset. DT_NEEDED libc.so.6 makes
  // glibc 2.36's ldconfig call an i386 library "libc6" rather than plain "ELF".
  Dyn dyn[4]{};
  dyn[0].d_tag = DT_STRTAB;
  dyn[0].d_un.d_val = strAt;
  dyn[1].d_tag = DT_SONAME;
  dyn[1].d_un.d_val = 1;
  dyn[2].d_tag = DT_NEEDED;
  dyn[2].d_un.d_val = static_cast<decltype(dyn[2].d_un.d_val)>(1 + soname.size() + 1);
  dyn[3].d_tag = DT_NULL;
  std::string out(reinterpret_cast<const char*>(&eh), sizeof eh);
  out.append(reinterpret_cast<const char*>(&ph), sizeof ph);
  out.append(reinterpret_cast<const char*>(dyn), sizeof dyn);
  out += '\0' + soname + '\0' + "libc.so.6" + '\0';
  return out;
}

std::string fakeLibrary(ElfIdentity id, const std::string& soname) {
  return id.elfClass == ELFCLASS64
             ? fakeLibrary<Elf64_Ehdr, Elf64_Phdr, Elf64_Dyn>(ELFCLASS64, id.machine, soname)
             : fakeLibrary<Elf32_Ehdr, Elf32_Phdr, Elf32_Dyn>(ELFCLASS32, id.machine, soname);
}

constexpr ElfIdentity kI386{ELFCLASS32, ELFDATA2LSB, EM_386};

class TempTree : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ctr-ldcache.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }

  void mkdirs(const std::string& rel) {
    ASSERT_TRUE(ctr::runProcess({"mkdir", "-p", dir_ + rel}).ok());
  }
  void write(const std::string& rel, const std::string& content) {
    ctr::writeFile(dir_ + rel, content);
  }

  std::string dir_;
};

// `ldconfig -p [-C cache]`: "\tSONAME (DESCRIPTION) => PATH" lines after a count line.
struct PrintedEntry {
  std::string soname, description, path;
};
std::vector<PrintedEntry> ldconfigPrint(const std::string& ldconfig, const std::string& cache,
                                        std::size_t& count) {
  ctr::ProcessOptions options;
  options.captureStdout = true;
  auto r = ctr::runProcessChecked({ldconfig, "-p", "-C", cache}, options);
  std::vector<PrintedEntry> out;
  std::istringstream in(r.capturedStdout);
  std::string line;
  count = 0;
  while (std::getline(in, line)) {
    // A compat file's hwcaps names are misread by glibc and may hold a newline.
    for (std::string more; !line.empty() && line[0] == '\t' && line.find(") => ") == std::string::npos &&
                           std::getline(in, more);)
      line += "\n" + more;
    if (line.empty() || line[0] != '\t') {
      if (line.find(" libs found in cache") != std::string::npos) count = std::stoul(line);
      continue;
    }
    const auto open = line.find(" (");
    const auto arrow = line.rfind(") => ");
    if (open == std::string::npos || arrow == std::string::npos) {
      ADD_FAILURE() << "unexpected ldconfig -p line: " << line;
      continue;
    }
    out.push_back({line.substr(1, open - 1), line.substr(open + 2, arrow - open - 2),
                   line.substr(arrow + 5)});
  }
  return out;
}

void expectSameAsLdconfigPrint(const std::string& ldconfig, const std::string& path,
                               const LdCache& cache) {
  std::size_t count = 0;
  const auto printed = ldconfigPrint(ldconfig, path, count);
  EXPECT_EQ(count, cache.entries.size());
  ASSERT_EQ(printed.size(), cache.entries.size());
  for (std::size_t i = 0; i < printed.size(); ++i) {
    const auto& e = cache.entries[i];
    EXPECT_EQ(printed[i].soname, e.soname) << "entry " << i;
    EXPECT_EQ(printed[i].path, e.path) << "entry " << i;
    std::string description = ctr::host::describeLdCacheFlags(e.flags);
    // glibc reads a compat file's hwcaps names from the wrong base (see ldcache.cpp).
    if (!e.hwcapsName.empty() && cache.format != LdCacheFormat::Compat)
      description += ", hwcap: \"" + e.hwcapsName + "\"";
    EXPECT_EQ(printed[i].description.substr(0, description.size()), description) << "entry " << i;
  }
}

TEST(LdCache, ReadsThisMachinesCacheAsLdconfigPrintsIt) {
  const std::string ldconfig = findLdconfig();
  if (ldconfig.empty()) CTR_SKIP_BECAUSE("no ldconfig on this machine");
  if (::access("/etc/ld.so.cache", R_OK) != 0) CTR_SKIP_BECAUSE("no readable /etc/ld.so.cache");
  const LdCache cache = ctr::host::readLdCache("/etc/ld.so.cache");
  EXPECT_FALSE(cache.entries.empty());
  expectSameAsLdconfigPrint(ldconfig, "/etc/ld.so.cache", cache);
  if (cache.format != LdCacheFormat::Old) {
    EXPECT_NE(cache.generator.find("ldconfig"), std::string::npos);
  }
}

TEST(LdCache, RefusesWhatIsNotACacheNamingTheFile) {
  try {
    (void)ctr::host::readLdCache("/etc/hostname");
    ADD_FAILURE() << "no error";
  } catch (const ctr::Error& e) {
    EXPECT_EQ(e.oneLine().find("ld.so cache /etc/hostname: "), 0u) << e.oneLine();
  }
  EXPECT_NE(errorOf("").find("too short"), std::string::npos);
  EXPECT_NE(errorOf("ld.so-1.").find("too short"), std::string::npos);
  EXPECT_NE(errorOf(std::string(64, 'x')).find("not an ld.so cache"), std::string::npos);
  EXPECT_THROW((void)ctr::host::readLdCache("/dev/zero"), ctr::Error);  // not a regular file
}

// This machine's cache, or the test is skipped.
std::string realCacheBytes() {
  return ctr::readFileIfPresent("/etc/ld.so.cache");
}

TEST(LdCache, TruncatedCachesGiveAnErrorNeverACrash) {
  const std::string bytes = realCacheBytes();
  if (bytes.empty()) CTR_SKIP_BECAUSE("no readable /etc/ld.so.cache");
  const LdCache whole = ctr::host::parseLdCache(bytesOf(bytes), "whole");
  const std::size_t step = bytes.size() / 300 + 1;
  for (std::size_t cut = 0; cut < bytes.size(); cut += cut < 256 ? 1 : step) {
    // Copied, so that AddressSanitizer sees a read past the cut.
    const std::string part = bytes.substr(0, cut);
    const std::string error = errorOf(part);
    // A new-format file ends in its extension data: every cut loses something.
    if (whole.format == LdCacheFormat::New) {
      EXPECT_FALSE(error.empty()) << "cut at " << cut;
    }
  }
}

// A small cache of this layout made by ldconfig, for the header tests.
class LdCacheHeader : public TempTree {
 protected:
  std::string newFormatCache() {
    const std::string bytes = realCacheBytes();
    if (bytes.rfind("glibc-ld.so.cache1.1", 0) == 0) return bytes;
    return {};
  }
  static void put32(std::string& s, std::size_t at, std::uint32_t v) { std::memcpy(s.data() + at, &v, 4); }
};

TEST_F(LdCacheHeader, RefusesInconsistentHeaderFields) {
  const std::string good = newFormatCache();
  if (good.empty()) CTR_SKIP_BECAUSE("/etc/ld.so.cache is missing or not in the new format");
  std::uint32_t nlibs = 0, extension = 0;
  std::memcpy(&nlibs, good.data() + 20, 4);
  std::memcpy(&extension, good.data() + 32, 4);
  auto with = [&](auto edit) {
    std::string s = good;
    edit(s);
    return errorOf(s);
  };
  EXPECT_NE(with([](std::string& s) { put32(s, 20, 0xffffffffu); }).find("entries do not fit"), std::string::npos);
  EXPECT_NE(with([](std::string& s) { put32(s, 24, 0xfffffff0u); }).find("string table"), std::string::npos);
  EXPECT_NE(with([](std::string& s) { s[28] = 1; }).find("marked invalid"), std::string::npos);
  EXPECT_NE(with([](std::string& s) { s[28] = std::endian::native == std::endian::little ? 3 : 2; })
                .find("-endian machine"), std::string::npos);
  EXPECT_NE(with([](std::string& s) { put32(s, 32, 0xfffffff0u); }).find("past the end"), std::string::npos);
  EXPECT_NE(with([&](std::string& s) { put32(s, 32, extension + 2); }).find("not 4-aligned"), std::string::npos);
  EXPECT_NE(with([&](std::string& s) { s[extension] ^= 0x55; }).find("bad extension magic"), std::string::npos);
  EXPECT_NE(with([&](std::string& s) { put32(s, extension + 4, 0x10000000u); }).find("extension sections"),
            std::string::npos);
  // An entry's name or path outside the string table.
  EXPECT_NE(with([](std::string& s) { put32(s, 48 + 4, 0xfffffff0u); }).find("entry 0 name"), std::string::npos);
  EXPECT_NE(with([](std::string& s) { put32(s, 48 + 8, 0); }).find("points before the string table"),
            std::string::npos);
  // An unterminated last string.
  const std::uint64_t stringsEnd = 48 + std::uint64_t{nlibs} * 24 + [&] {
    std::uint32_t len = 0;
    std::memcpy(&len, good.data() + 24, 4);
    return len;
  }();
  EXPECT_NE(with([&](std::string& s) { s[stringsEnd - 1] = 'x'; }).find("not terminated"), std::string::npos);
}

TEST_F(LdCacheHeader, RandomDamageGivesAnErrorOrACacheNeverACrash) {
  const std::string good = realCacheBytes();
  if (good.empty()) CTR_SKIP_BECAUSE("no readable /etc/ld.so.cache");
  std::mt19937 rng(8);
  for (int round = 0; round < 2000; ++round) {
    std::string s = good.substr(0, std::min<std::size_t>(good.size(), 4096 + rng() % good.size()));
    for (int flips = 1 + rng() % 8; flips > 0; --flips) {
      // Mostly the header and entries, where offsets live.
      const std::size_t at = rng() % 2 ? rng() % std::min<std::size_t>(s.size(), 512) : rng() % s.size();
      s[at] = static_cast<char>(rng());
    }
    try {
      (void)ctr::host::parseLdCache(bytesOf(s), "damaged");
    } catch (const ctr::Error& e) {
      EXPECT_EQ(e.oneLine().find('\n'), std::string::npos);
    }
  }
}

TEST(ElfIdentity, ReadsClassAndMachineFromTheHeader) {
  const ElfIdentity self = ctr::host::hostElfIdentity();
  EXPECT_TRUE(self.elfClass == ELFCLASS64 || self.elfClass == ELFCLASS32);
  EXPECT_NE(self.machine, 0);
  EXPECT_EQ(ctr::host::elfClassAndMachine("/proc/self/exe"), self);
#if defined(__x86_64__)
  EXPECT_EQ(ctr::host::describe(self), "ELF64 x86-64");
  EXPECT_EQ(ctr::host::ldCacheFlagsFor(self), ctr::host::kLdFlagElfLibc6 | ctr::host::kLdFlagX8664Lib64);
  EXPECT_EQ(ctr::host::describeLdCacheFlags(*ctr::host::ldCacheFlagsFor(self)), "libc6,x86-64");
#endif
  EXPECT_EQ(ctr::host::describe(kI386), "ELF32 i386");
  EXPECT_EQ(ctr::host::ldCacheFlagsFor(kI386), ctr::host::kLdFlagElfLibc6);
}

class ElfHeader : public TempTree {
 protected:
  std::string errorOfElf(const std::string& path) {
    try {
      (void)ctr::host::elfClassAndMachine(path);
    } catch (const ctr::Error& e) {
      return e.oneLine();
    }
    return "";
  }
};

TEST_F(ElfHeader, ReadsAHandMade32BitLibraryAndRefusesNonElfFiles) {
  write("/lib32.so", fakeLibrary(kI386, "lib32.so.1"));
  EXPECT_EQ(ctr::host::elfClassAndMachine(dir_ + "/lib32.so"), kI386);
  write("/text", "#!/bin/sh\necho this is not ELF\n");
  EXPECT_NE(errorOfElf(dir_ + "/text").find(dir_ + "/text is not an ELF file"), std::string::npos);
  write("/short", "\x7f" "ELF");
  EXPECT_NE(errorOfElf(dir_ + "/short").find("is not an ELF file"), std::string::npos);
  std::string badClass = fakeLibrary(kI386, "x");
  badClass[EI_CLASS] = 7;
  write("/badclass", badClass);
  EXPECT_NE(errorOfElf(dir_ + "/badclass").find("unknown ELF class"), std::string::npos);
  EXPECT_NE(errorOfElf(dir_).find("is a directory"), std::string::npos);
  EXPECT_NE(errorOfElf(dir_ + "/missing").find("cannot open " + dir_ + "/missing"), std::string::npos);
  EXPECT_NE(errorOfElf("/dev/null").find("not an ELF file"), std::string::npos);
}

TEST(NvLibList, ParsesLibrariesProgramsAndFiles) {
  const auto list = ctr::host::parseLibraryList(
      "# comment\n\nnvidia-smi\nlibcuda.so   # the driver API\nlibnvidia-ml.so\n"
      "libexact.so.1\n/usr/share/vulkan/icd.d/nvidia_icd.json\nlibcuda.so\n",
      "list");
  EXPECT_EQ(list.binaries, (std::vector<std::string>{"nvidia-smi"}));
  EXPECT_EQ(list.libraries, (std::vector<std::string>{"libcuda.so", "libnvidia-ml.so", "libexact.so.1"}));
  EXPECT_EQ(list.files, (std::vector<std::string>{"/usr/share/vulkan/icd.d/nvidia_icd.json"}));
}

TEST(NvLibList, RefusesRelativePathsAndTwoNamesOnALine) {
  auto errorOfList = [](const std::string& text) {
    try {
      (void)ctr::host::parseLibraryList(text, "nvliblist.conf");
    } catch (const ctr::Error& e) {
      return e.oneLine();
    }
    return std::string();
  };
  EXPECT_EQ(errorOfList("libcuda.so\nlib/libx.so\n"),
            "nvliblist.conf:2: 'lib/libx.so' is neither a bare name nor an absolute path");
  EXPECT_EQ(errorOfList("libcuda.so libnvidia-ml.so\n"),
            "nvliblist.conf:1: one name per line, got 'libcuda.so libnvidia-ml.so'");
}

TEST(NvLibList, TheShippedListNamesTheDriverLibrariesAndPrograms) {
  const auto list = ctr::host::readLibraryList(std::string(CTR_SOURCE_DIR) + "/etc/nvliblist.conf");
  auto has = [](const std::vector<std::string>& v, const std::string& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  EXPECT_TRUE(has(list.libraries, "libcuda.so"));
  EXPECT_TRUE(has(list.libraries, "libnvidia-ml.so"));
  EXPECT_TRUE(has(list.binaries, "nvidia-smi"));
  EXPECT_TRUE(has(list.binaries, "nvidia-persistenced"));
  EXPECT_TRUE(has(list.files, "/usr/share/vulkan/icd.d/nvidia_icd.json"));
  for (const auto& lib : list.libraries) EXPECT_TRUE(lib.ends_with(".so")) << lib;
}

// A fixture host: 64-bit driver libraries in /usr/lib64, a 32-bit libcuda in /usr/lib32
// and a glibc-hwcaps build (x86_64 only), with a cache made by ldconfig -r in each layout.
class NvLibSelection : public TempTree, public ::testing::WithParamInterface<const char*> {
 protected:
  void SetUp() override {
    TempTree::SetUp();
    ldconfig_ = findLdconfig();
    host_ = ctr::host::hostElfIdentity();
    mkdirs("/etc");
    mkdirs("/usr/lib64");
    mkdirs("/usr/lib32");
    write("/etc/ld.so.conf", "/usr/lib64\n/usr/lib32\n");
    for (const char* soname : {"libcuda.so.1", "libnvidia-ml.so.1", "libnvidia-ptxjitcompiler.so.1", "libfoo.so.1"})
      write(std::string("/usr/lib64/") + soname, fakeLibrary(host_, soname));
#if defined(__x86_64__)
    write("/usr/lib32/libcuda.so.1", fakeLibrary(kI386, "libcuda.so.1"));
    mkdirs("/usr/lib64/glibc-hwcaps/x86-64-v3");
    write("/usr/lib64/glibc-hwcaps/x86-64-v3/libnvidia-ml.so.1", fakeLibrary(host_, "libnvidia-ml.so.1"));
#endif
  }

  // Builds TREE/etc/ld.so.cache with `ldconfig -c format`; as a user, inside a user
  // namespace, since -r chroots.
  std::string buildCache(const std::string& format, std::string& whyNot) {
    if (ldconfig_.empty()) {
      whyNot = "no ldconfig on this machine";
      return {};
    }
    std::vector<std::string> argv{ldconfig_, "-r", dir_, "-C", "/etc/ld.so.cache", "-f",
                                  "/etc/ld.so.conf", "-c", format, "-X", "-i"};
    if (::geteuid() != 0) argv.insert(argv.begin(), {"unshare", "-r"});
    ctr::ProcessOptions options;
    options.captureStdout = options.captureStderr = true;
    auto r = ctr::runProcess(argv, options);
    if (!r.ok()) {
      whyNot = "ldconfig -r could not build a fixture cache: " + r.describe() + ": " + r.capturedStderr;
      return {};
    }
    return dir_ + "/etc/ld.so.cache";
  }

  const ctr::host::SkippedLibrary* skipped(const ctr::host::LibrarySelection& s, const std::string& path) {
    for (const auto& k : s.skipped)
      if (k.path == path) return &k;
    return nullptr;
  }

  std::string ldconfig_;
  ElfIdentity host_;
};

TEST_P(NvLibSelection, PicksTheHostsBuildOfEachListedLibraryAndSaysWhatItSkipped) {
  const std::string format = GetParam();
  std::string whyNot;
  const std::string cachePath = buildCache(format, whyNot);
  if (cachePath.empty()) CTR_SKIP_BECAUSE(whyNot);
  const LdCache cache = ctr::host::readLdCache(cachePath);
  EXPECT_EQ(cache.format, format == "old"      ? LdCacheFormat::Old
                          : format == "compat" ? LdCacheFormat::Compat
                                               : LdCacheFormat::New);
  expectSameAsLdconfigPrint(ldconfig_, cachePath, cache);

  // A cache can go stale: libnvidia-ptxjitcompiler became 32-bit after ldconfig ran.
  write("/usr/lib64/libnvidia-ptxjitcompiler.so.1", fakeLibrary(kI386, "libnvidia-ptxjitcompiler.so.1"));

  const std::vector<std::string> listed{"libcuda.so", "libnvidia-ml.so", "libnvidia-ptxjitcompiler.so",
                                        "libnvidia-absent.so"};
  const auto sel = ctr::host::selectLibraries(cache, listed, host_, dir_);
  ASSERT_EQ(sel.selected.size(), 2u);
  EXPECT_EQ(sel.selected[0].listed, "libcuda.so");
  EXPECT_EQ(sel.selected[0].soname, "libcuda.so.1");
  EXPECT_EQ(sel.selected[0].path, dir_ + "/usr/lib64/libcuda.so.1");
  EXPECT_EQ(sel.selected[1].soname, "libnvidia-ml.so.1");
  EXPECT_EQ(sel.selected[1].path, dir_ + "/usr/lib64/libnvidia-ml.so.1");

  const auto* stale = skipped(sel, "/usr/lib64/libnvidia-ptxjitcompiler.so.1");
  ASSERT_NE(stale, nullptr);
  EXPECT_EQ(stale->reason.find("its ELF header says ELF32 i386, not " + ctr::host::describe(host_)), 0u)
      << stale->reason;
  ASSERT_FALSE(sel.skipped.empty());
  EXPECT_EQ(sel.skipped.back().listed, "libnvidia-absent.so");
  EXPECT_EQ(sel.skipped.back().soname, "");
  EXPECT_EQ(sel.skipped.back().reason, "not in the ld.so cache");
#if defined(__x86_64__)
  const auto* i386 = skipped(sel, "/usr/lib32/libcuda.so.1");
  ASSERT_NE(i386, nullptr);
  EXPECT_EQ(i386->reason, "built for libc6, not libc6,x86-64");
  // The old layout has no hwcap field; the directory still tells.
  const auto* v3 = skipped(sel, "/usr/lib64/glibc-hwcaps/x86-64-v3/libnvidia-ml.so.1");
  ASSERT_NE(v3, nullptr);
  EXPECT_EQ(v3->reason, "a glibc-hwcaps/x86-64-v3 build; the baseline one is used");
#endif
  // libfoo is not listed: neither selected nor reported.
  for (const auto& k : sel.skipped) EXPECT_NE(k.soname, "libfoo.so.1");
}

TEST_P(NvLibSelection, EveryTruncationOfAFixtureCacheIsAnError) {
  std::string whyNot;
  const std::string cachePath = buildCache(GetParam(), whyNot);
  if (cachePath.empty()) CTR_SKIP_BECAUSE(whyNot);
  const std::string bytes = ctr::readFileIfPresent(cachePath);
  for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
    const std::string part = bytes.substr(0, cut);
    try {
      const LdCache c = ctr::host::parseLdCache(bytesOf(part), "fixture");
      // The old layout has no length: a cut inside the last path can still parse (shorter).
      EXPECT_STREQ(GetParam(), "old") << "cut at " << cut << " parsed " << c.entries.size();
    } catch (const ctr::Error&) {
    }
  }
}

// --nv without CDI on a fixture node: the scan of a loaded driver, kept in the state
// directory and read back by the next launch until the ld.so cache or the list changes.
TEST_P(NvLibSelection, ScansALoadedDriverOnceAndReadsTheScanBackUntilTheCacheChanges) {
  std::string whyNot;
  const std::string cachePath = buildCache(GetParam(), whyNot);
  if (cachePath.empty()) CTR_SKIP_BECAUSE(whyNot);
  ctr::host::GpuScanInputs in;
  in.root = dir_;
  in.libraryList = dir_ + "/nvliblist.conf";
  in.searchPath = "/usr/bin:/sbin";  // the node's PATH, looked up under the root
  in.cacheDir = dir_ + "/state";
  write("/nvliblist.conf", "libcuda.so\nlibnvidia-ml.so\nnvidia-smi\n/etc/vulkan/icd.d/nvidia_icd.json\n");
  // No driver loaded: a clear error, whatever the rest of the node has.
  try {
    (void)ctr::host::scanGpuDriver(in);
    FAIL() << "scanned a node without the driver";
  } catch (const ctr::Error& e) {
    EXPECT_EQ(std::string(e.what()).find("no NVIDIA driver on this host ("), 0u) << e.what();
  }
  mkdirs("/proc/driver/nvidia");
  write("/proc/driver/nvidia/version",
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n");
  mkdirs("/dev/nvidia-caps");
  mkdirs("/state");
  mkdirs("/usr/bin");
  for (const char* node : {"/dev/nvidia10", "/dev/nvidia2", "/dev/nvidiactl", "/dev/nvidia-uvm"}) write(node, "");
  write("/usr/bin/nvidia-smi", "#!/bin/sh\n");
  ASSERT_EQ(::chmod((dir_ + "/usr/bin/nvidia-smi").c_str(), 0755), 0);

  const auto first = ctr::host::scanGpuDriver(in);
  EXPECT_FALSE(first.fromCache);
  EXPECT_EQ(first.version, "535.104.05");
  ASSERT_EQ(first.libraries.size(), 2u);
  EXPECT_EQ(first.libraries[0].soname, "libcuda.so.1");
  ASSERT_EQ(first.binaries.size(), 1u);
  EXPECT_EQ(first.binaries[0].second, dir_ + "/usr/bin/nvidia-smi");
  EXPECT_TRUE(first.files.empty());
  EXPECT_EQ(first.devices, (std::vector<std::string>{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-caps",
                                                     "/dev/nvidia2", "/dev/nvidia10"}));

  EXPECT_EQ(ctr::host::hostPath(first, "/dev/nvidia2"), dir_ + "/dev/nvidia2");

  const auto second = ctr::host::scanGpuDriver(in);
  EXPECT_TRUE(second.fromCache);
  EXPECT_EQ(ctr::host::toJson(second)["libraries"], ctr::host::toJson(first)["libraries"]);
  EXPECT_EQ(second.devices, first.devices);

  // A new list (or a new ld.so cache, or driver) is another key: scanned again.
  write("/nvliblist.conf", "libcuda.so\n");
  const auto third = ctr::host::scanGpuDriver(in);
  EXPECT_FALSE(third.fromCache);
  EXPECT_EQ(third.libraries.size(), 1u);
}

// The scan cache record: every field a launch uses comes back; damage of any kind is
// "no record" (the launch scans again), never a crash or a half-read driver.
TEST(GpuScanCache, RoundTripsAndRefusesDamage) {
  ctr::host::GpuDriver d;
  d.vendor = ctr::host::GpuVendor::Amd;
  d.version = "6.3.6";
  d.libraries = {{"libamdhip64.so", "libamdhip64.so.6", "/opt/rocm/lib/libamdhip64.so.6", 0x303},
                 {"libhsa-runtime64.so", "libhsa-runtime64.so.1", "/opt/rocm/lib/libhsa-runtime64.so.1", 3}};
  d.skipped = {{"libfoo.so", "libfoo.so.2", "/x/libfoo.so.2", "32-bit build"}};
  d.binaries = {{"rocm-smi", "/opt/rocm/bin/rocm-smi"}};
  d.files = {"/etc/OpenCL/vendors/amdocl64.icd"};
  d.sockets = {"/run/some.sock"};
  d.needsGlibc = "2.34";
  d.needsGlibcLibrary = "libamdhip64.so.6";
  d.devices = {"/dev/kfd"};  // not part of the record
  const std::string bytes = ctr::host::toJson(d).dump();
  const auto back = ctr::host::gpuDriverFromJson(bytes);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->vendor, d.vendor);
  EXPECT_EQ(back->version, d.version);
  ASSERT_EQ(back->libraries.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back->libraries[i].listed, d.libraries[i].listed);
    EXPECT_EQ(back->libraries[i].soname, d.libraries[i].soname);
    EXPECT_EQ(back->libraries[i].path, d.libraries[i].path);
    EXPECT_EQ(back->libraries[i].flags, d.libraries[i].flags);
  }
  ASSERT_EQ(back->skipped.size(), 1u);
  EXPECT_EQ(back->skipped[0].reason, "32-bit build");
  EXPECT_EQ(back->skipped[0].path, "/x/libfoo.so.2");
  EXPECT_EQ(back->binaries, d.binaries);
  EXPECT_EQ(back->files, d.files);
  EXPECT_EQ(back->sockets, d.sockets);
  EXPECT_EQ(back->needsGlibc, "2.34");
  EXPECT_EQ(back->needsGlibcLibrary, "libamdhip64.so.6");
  EXPECT_TRUE(back->devices.empty());
  EXPECT_EQ(ctr::host::toJson(*back)["libraries"], ctr::host::toJson(d)["libraries"]);

  for (std::size_t cut = 0; cut < bytes.size(); ++cut)
    EXPECT_FALSE(ctr::host::gpuDriverFromJson(bytes.substr(0, cut))) << "cut at " << cut;
  EXPECT_FALSE(ctr::host::gpuDriverFromJson(R"({"vendor": "AMD", "version": "1", "libraries": [{"listed": "x"}]})"));
  std::mt19937 random(56);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string damaged = bytes;
    damaged[random() % damaged.size()] = static_cast<char>(random());
    if (auto read = ctr::host::gpuDriverFromJson(damaged)) {
      for (const auto& l : read->libraries) EXPECT_FALSE(l.path.empty() || l.soname.empty());
    }
  }
}

// The version word of /proc/driver/nvidia/version in the formats the driver has written.
TEST(NvidiaDriverVersion, IsTheFirstDottedNumberWordOfTheFirstLine) {
  char tmpl[] = "/tmp/ctr-nvversion.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  ASSERT_EQ(::system(("mkdir -p " + root + "/proc/driver/nvidia").c_str()), 0);
  auto versionOf = [&](const std::string& text) {
    std::ofstream(root + "/proc/driver/nvidia/version") << text;
    return ctr::host::nvidiaDriverVersion(root);
  };
  EXPECT_EQ(versionOf("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
                      "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"),
            "535.104.05");
  EXPECT_EQ(versionOf("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Mar  5 22:15:33 UTC 2024\n"),
            "550.54.15");
  EXPECT_EQ(versionOf("NVRM version: NVIDIA UNIX aarch64 Kernel Module  470.82\tThu Oct 28 2021\n"), "470.82");
  // x86_64 and aarch64 are not versions; nor are words with other dots or four parts.
  EXPECT_EQ(versionOf("NVRM version: NVIDIA UNIX x86_64 Kernel Module 1.2.3.4 5. .6 7..8\n"), "unknown");
  EXPECT_EQ(versionOf("garbage\n"), "unknown");
  std::filesystem::remove(root + "/proc/driver/nvidia/version");
  EXPECT_EQ(ctr::host::nvidiaDriverVersion(root), "");  // no driver loaded
  std::filesystem::remove_all(root);
}

INSTANTIATE_TEST_SUITE_P(LdCacheFormats, NvLibSelection, ::testing::Values("new", "compat", "old"),
                         [](const auto& param) { return std::string(param.param); });

}  // namespace
