// --mpi=bind (issue 8, item 4): version names and the ABI check, the host MPI resolved
// through an ld.so cache that ldconfig made for a fixture tree of libraries gcc built with
// real sonames, the image's library found through the image's own cache or its lib
// directories, and the plan (mounts with provenance, LD_LIBRARY_PATH, --explain).
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/launch.hpp"
#include "ctr/mpi.hpp"
#include "ctr/run_process.hpp"
#include "plan_helpers.hpp"
#include "platform_probes.hpp"

namespace {

using ctr::host::MpiAbiCheck;
using ctr::host::MpiFamily;

TEST(MpiVersion, ParsesRealFileNames) {
  auto v = ctr::host::parseLibraryVersion("libmpi.so.40.30.4");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->stem, "libmpi.so");
  EXPECT_EQ(v->numbers, (std::vector<int>{40, 30, 4}));
  EXPECT_EQ(v->majorNumber(), 40);
  EXPECT_EQ(v->minorNumber(), 30);
  EXPECT_EQ(ctr::host::versionText(*v), "40.30.4");
  v = ctr::host::parseLibraryVersion("libmpich.so.12");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->minorNumber(), 0);  // absent: 0, as Sarus reads it
  v = ctr::host::parseLibraryVersion("libfoo.so");
  ASSERT_TRUE(v);
  EXPECT_TRUE(v->numbers.empty());
  EXPECT_FALSE(ctr::host::parseLibraryVersion("libmpi.so.40.x"));
  EXPECT_FALSE(ctr::host::parseLibraryVersion("libmpi.so.40."));
  EXPECT_FALSE(ctr::host::parseLibraryVersion("README"));
}

TEST(MpiVersion, FamiliesBySoname) {
  EXPECT_EQ(ctr::host::mpiFamilyOf("libmpi.so.40"), MpiFamily::OpenMpi);
  EXPECT_EQ(ctr::host::mpiFamilyOf("/usr/lib/libmpi.so.40.30.4"), MpiFamily::OpenMpi);
  EXPECT_EQ(ctr::host::mpiFamilyOf("libmpi.so.20.10.0"), MpiFamily::OpenMpi);
  EXPECT_EQ(ctr::host::mpiFamilyOf("libmpi.so.12"), MpiFamily::Mpich);
  EXPECT_EQ(ctr::host::mpiFamilyOf("libmpi.so.12.1.1"), MpiFamily::Mpich);
  EXPECT_EQ(ctr::host::mpiFamilyOf("libmpich.so.12.2.2"), MpiFamily::Mpich);
  EXPECT_EQ(ctr::host::mpiFamilyOf("libmpi.so.120.0.0"), MpiFamily::OpenMpi);
  EXPECT_EQ(ctr::host::mpiFamilyOf("libopen-pal.so.40"), MpiFamily::Unknown);
  EXPECT_EQ(ctr::host::mpiFamilyOf("libmpi_cxx.so.40"), MpiFamily::Unknown);
}

TEST(MpiAbi, StrictAndRelaxedAsDocumented) {
  using ctr::host::checkMpiAbi;
  // Same major, host minor >= image minor: a forward replacement, fine in both modes.
  for (auto mode : {MpiAbiCheck::Strict, MpiAbiCheck::Relaxed}) {
    auto v = checkMpiAbi("libmpi.so.40.30.4", "libmpi.so.40.20.1", mode);
    EXPECT_TRUE(v.compatible);
    EXPECT_EQ(v.message, "");
    v = checkMpiAbi("libmpi.so.40.30.4", "libmpi.so.40.30.9", mode);  // patch: never looked at
    EXPECT_TRUE(v.compatible) << v.message;
    v = checkMpiAbi("libmpich.so.12.2.2", "libmpich.so.12", mode);
    EXPECT_TRUE(v.compatible) << v.message;
  }
  // Image newer (backward replacement): strict refuses, relaxed warns.
  auto v = checkMpiAbi("libmpi.so.40.30.4", "libmpi.so.40.99.0", MpiAbiCheck::Strict);
  EXPECT_FALSE(v.compatible);
  EXPECT_NE(v.message.find("libmpi.so.40.30.4"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("libmpi.so.40.99.0"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("host 40.30.4, image 40.99.0"), std::string::npos) << v.message;
  v = checkMpiAbi("libmpi.so.40.30.4", "libmpi.so.40.99.0", MpiAbiCheck::Relaxed);
  EXPECT_TRUE(v.compatible);
  EXPECT_NE(v.message.find("relaxed"), std::string::npos) << v.message;
  // Majors differ: refused in both.
  for (auto mode : {MpiAbiCheck::Strict, MpiAbiCheck::Relaxed}) {
    v = checkMpiAbi("libmpi.so.40.30.4", "libmpi.so.20.10.2", mode);
    EXPECT_FALSE(v.compatible);
    EXPECT_NE(v.message.find("major"), std::string::npos) << v.message;
  }
  // Families never mix, even where the stems agree.
  v = checkMpiAbi("libmpi.so.40.30.4", "libmpi.so.12.1.1", MpiAbiCheck::Relaxed);
  EXPECT_FALSE(v.compatible);
  EXPECT_NE(v.message.find("Open MPI"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("MPICH ABI"), std::string::npos) << v.message;
  // Different libraries, or no version to compare.
  EXPECT_FALSE(checkMpiAbi("libmpi.so.40.30.4", "libmpich.so.40.30.4", MpiAbiCheck::Relaxed).compatible);
  EXPECT_FALSE(checkMpiAbi("libmpi.so.40.30.4", "libmpi.so", MpiAbiCheck::Relaxed).compatible);
}

std::string findLdconfig() {
  for (const char* p : {"/sbin/ldconfig", "/usr/sbin/ldconfig", "/usr/bin/ldconfig"})
    if (::access(p, X_OK) == 0) return p;
  return {};
}

// A fixture tree: the host's MPI (libmpi.so.40.30.4 needing libopen-pal.so.40 needing
// libz-fake.so.1 and libc), a library a DT_NEEDED names that is not there, rdma-core's
// libibverbs.so.1 with a provider directory, /etc/openmpi; a cache from `ldconfig -r`.
class MpiTree : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ctr-mpi-unit.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }

  bool run(std::vector<std::string> argv) {
    ctr::ProcessOptions options;
    options.captureStdout = options.captureStderr = true;
    auto r = ctr::runProcess(argv, options);
    if (!r.ok()) why_ = argv[0] + ": " + r.describe() + ": " + r.capturedStderr;
    return r.ok();
  }
  // gcc -shared with a soname, linked against `needs` (file names in the same directory).
  bool library(const std::string& root, const std::string& dir, const std::string& file, const std::string& soname,
               const std::vector<std::string>& needs = {}) {
    std::filesystem::create_directories(root + dir);
    const std::string src = root + dir + "/" + file + ".c";
    // puts: a GLIBC_2.x version need, as real libraries have.
    ctr::writeFile(src, "#include <stdio.h>\nint f_" + std::to_string(std::hash<std::string>{}(file) % 100000) +
                            "(void) { return puts(\"\"); }\n");
    // --no-as-needed: Debian's gcc drops DT_NEEDED entries whose symbols go unused.
    std::vector<std::string> argv{"gcc", "-shared", "-fPIC", "-o", root + dir + "/" + file, src, "-Wl,-soname," + soname,
                                  "-Wl,--no-as-needed"};
    for (const auto& n : needs) argv.push_back(root + dir + "/" + n);
    const bool ok = run(argv);
    std::filesystem::remove(src);
    return ok;
  }
  bool cache(const std::string& root, const std::string& conf) {
    std::filesystem::create_directories(root + "/etc");
    ctr::writeFile(root + "/etc/ld.so.conf", conf);
    std::vector<std::string> argv{findLdconfig(), "-r", root, "-C", "/etc/ld.so.cache", "-f", "/etc/ld.so.conf"};
    if (::geteuid() != 0) argv.insert(argv.begin(), {"unshare", "-r"});
    return run(argv);
  }
  // The host tree; false (with why_) when this machine cannot build it.
  bool hostTree() {
    if (findLdconfig().empty() || !run({"gcc", "--version"})) {
      why_ = "no ldconfig or gcc";
      return false;
    }
    host_ = dir_ + "/host";
    return library(host_, "/usr/lib64", "libz-fake.so.1.2.13", "libz-fake.so.1") &&
           library(host_, "/usr/lib64", "libgone.so.3.0.0", "libgone.so.3") &&
           library(host_, "/usr/lib64", "libopen-pal.so.40.30.3", "libopen-pal.so.40",
                   {"libz-fake.so.1.2.13", "libgone.so.3.0.0"}) &&
           library(host_, "/usr/lib64", "libmpi.so.40.30.4", "libmpi.so.40", {"libopen-pal.so.40.30.3"}) &&
           library(host_, "/usr/lib64", "libibverbs.so.1.14.44.0", "libibverbs.so.1") &&
           std::filesystem::create_directories(host_ + "/usr/lib64/libibverbs") &&
           std::filesystem::create_directories(host_ + "/etc/libibverbs.d") &&
           std::filesystem::create_directories(host_ + "/etc/openmpi") &&
           // libgone is linked against, then left out of the cache's directories.
           run({"mkdir", "-p", host_ + "/elsewhere"}) &&
           run({"mv", host_ + "/usr/lib64/libgone.so.3.0.0", host_ + "/elsewhere/"}) &&
           cache(host_, "/usr/lib64\n");
  }

  std::string dir_, host_, why_;
};

TEST_F(MpiTree, ResolvesTheConfiguredLibrariesTheirDependenciesAndTheFabric) {
  if (!hostTree()) CTR_SKIP_BECAUSE(why_);
  ctr::host::MpiScanInputs in;
  in.root = host_;
  in.libraries = {"libmpi.so.40"};
  in.paths = {"/etc/openmpi", "/etc/no-such-mpi-dir"};
  const auto mpi = ctr::host::scanHostMpi(in);
  EXPECT_EQ(mpi.family, MpiFamily::OpenMpi);
  ASSERT_EQ(mpi.libraries.size(), 1u);
  EXPECT_EQ(mpi.libraries[0].soname, "libmpi.so.40");
  // The real file, whose name carries the version the ABI check reads.
  EXPECT_EQ(mpi.libraries[0].path, host_ + "/usr/lib64/libmpi.so.40.30.4");
  EXPECT_NE(mpi.libraries[0].from.find("ctr.conf 'mpi library' libmpi.so.40: ld.so cache libmpi.so.40"), std::string::npos)
      << mpi.libraries[0].from;
  std::vector<std::string> deps;
  for (const auto& d : mpi.dependencies) deps.push_back(d.soname);
  // rdma-core's library (the host has it), then DT_NEEDED breadth first; libc is the image's.
  EXPECT_EQ(deps, (std::vector<std::string>{"libibverbs.so.1", "libopen-pal.so.40", "libz-fake.so.1"}))
      << ::testing::PrintToString(mpi.skipped);
  for (const auto& d : mpi.dependencies) {
    if (d.soname == "libz-fake.so.1") {
      EXPECT_NE(d.from.find("DT_NEEDED of libopen-pal.so.40"), std::string::npos) << d.from;
    }
  }
  bool goneSkipped = false, missingPathSkipped = false;
  for (const auto& s : mpi.skipped) {
    goneSkipped = goneSkipped || s.find("libgone.so.3 (needed by libopen-pal.so.40)") != std::string::npos;
    missingPathSkipped = missingPathSkipped || s.find("/etc/no-such-mpi-dir") != std::string::npos;
    EXPECT_EQ(s.find("libc.so"), std::string::npos) << s;
  }
  EXPECT_TRUE(goneSkipped);
  EXPECT_TRUE(missingPathSkipped);
  std::vector<std::string> paths;
  for (const auto& p : mpi.paths) paths.push_back(p.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"/etc/openmpi", "/etc/libibverbs.d", "/usr/lib64/libibverbs"}));
  EXPECT_FALSE(mpi.needsGlibc.empty());  // gcc's output needs some GLIBC_2.x
  const auto j = ctr::host::toJson(mpi);
  EXPECT_EQ(j["abi"], "Open MPI");
  EXPECT_EQ(j["libraries"][0]["version"], "40.30.4");
}

TEST_F(MpiTree, PluginsNeedsComeAlongAndTheScanIsCachedUntilTheLdCacheChanges) {
  if (!hostTree()) CTR_SKIP_BECAUSE(why_);
  // A component directory: a plugin that needs a library only the cache knows, and one that
  // needs its neighbour (found through $ORIGIN, so in the bound directory already).
  ASSERT_TRUE(library(host_, "/usr/lib64", "libfabric-fake.so.1.0.0", "libfabric-fake.so.1")) << why_;
  ASSERT_TRUE(library(host_, "/usr/lib64/openmpi", "libmca_common_x.so.40", "libmca_common_x.so.40")) << why_;
  ASSERT_TRUE(library(host_, "/usr/lib64/openmpi", "mca_mtl_fake.so", "mca_mtl_fake.so",
                      {"../libfabric-fake.so.1.0.0", "libmca_common_x.so.40"}))
      << why_;
  ASSERT_TRUE(cache(host_, "/usr/lib64\n")) << why_;
  const std::string state = dir_ + "/state";
  std::filesystem::create_directories(state);
  ctr::host::MpiScanInputs in;
  in.root = host_;
  in.libraries = {"libmpi.so.40"};
  in.paths = {"/usr/lib64/openmpi"};
  in.cacheDir = state;
  const auto first = ctr::host::scanHostMpi(in);
  EXPECT_FALSE(first.fromCache);
  bool fabric = false;
  for (const auto& d : first.dependencies)
    if (d.soname == "libfabric-fake.so.1") {
      fabric = true;
      EXPECT_EQ(d.from.find("DT_NEEDED of plugin /usr/lib64/openmpi/mca_mtl_fake.so"), 0u) << d.from;
    }
  EXPECT_TRUE(fabric);
  for (const auto& note : first.skipped) EXPECT_EQ(note.find("libmca_common_x"), std::string::npos) << note;
  const auto second = ctr::host::scanHostMpi(in);
  EXPECT_TRUE(second.fromCache);
  EXPECT_EQ(second.dependencies, first.dependencies);
  EXPECT_EQ(second.paths, first.paths);
  EXPECT_EQ(second.skipped, first.skipped);
  EXPECT_EQ(second.family, first.family);
  // A library installed (ldconfig rewrites the cache): scanned again.
  ::usleep(10000);
  ASSERT_TRUE(cache(host_, "/usr/lib64\n")) << why_;
  EXPECT_FALSE(ctr::host::scanHostMpi(in).fromCache);
  EXPECT_TRUE(ctr::host::scanHostMpi(in).fromCache);
}

TEST_F(MpiTree, RefusesWhatIsNotThereAndMixedFamilies) {
  if (!hostTree()) CTR_SKIP_BECAUSE(why_);
  ASSERT_TRUE(library(host_, "/usr/lib64", "libmpich.so.12.2.2", "libmpich.so.12"));
  ASSERT_TRUE(cache(host_, "/usr/lib64\n"));
  ctr::host::MpiScanInputs in;
  in.root = host_;
  auto errorOf = [&] {
    try {
      (void)ctr::host::scanHostMpi(in);
    } catch (const ctr::Error& e) {
      return e.oneLine();
    }
    return std::string();
  };
  EXPECT_NE(errorOf().find("no host MPI is configured"), std::string::npos);
  in.libraries = {"libmpi.so.99"};
  EXPECT_EQ(errorOf(), "ctr.conf 'mpi library' libmpi.so.99: not in the host's ld.so cache");
  in.libraries = {"/usr/lib64/libmpi.so.77"};
  EXPECT_EQ(errorOf(), "ctr.conf 'mpi library' /usr/lib64/libmpi.so.77: no such file on the host");
  in.libraries = {"libmpi.so.40", "libmpich.so.12"};
  EXPECT_NE(errorOf().find("mixes Open MPI and MPICH ABI"), std::string::npos) << errorOf();
  // An absolute path names the library by its real file: the soname is its name to the major.
  in.libraries = {"/usr/lib64/libmpich.so.12"};
  const auto mpi = ctr::host::scanHostMpi(in);
  ASSERT_EQ(mpi.libraries.size(), 1u);
  EXPECT_EQ(mpi.libraries[0].soname, "libmpich.so.12");
  EXPECT_EQ(mpi.family, MpiFamily::Mpich);
}

TEST_F(MpiTree, FindsTheImagesLibraryThroughItsCacheElseItsLibDirectories) {
  if (findLdconfig().empty() || !run({"gcc", "--version"})) CTR_SKIP_BECAUSE("no ldconfig or gcc");
  const std::string image = dir_ + "/image";
  // Open MPI under /opt, known to the image's ld.so only through its cache.
  ASSERT_TRUE(library(image, "/opt/ompi/lib", "libmpi.so.40.20.1", "libmpi.so.40")) << why_;
  ASSERT_TRUE(library(image, "/usr/local/lib", "libmpich.so.12.1.0", "libmpich.so.12")) << why_;
  ASSERT_TRUE(cache(image, "/opt/ompi/lib\n")) << why_;
  ctr::UniqueFd root(::open(image.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(root);
  auto found = ctr::host::findImageLibrary(root.get(), "libmpi.so.40");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->path, "/opt/ompi/lib/libmpi.so.40");
  EXPECT_EQ(found->realPath, "/opt/ompi/lib/libmpi.so.40.20.1");
  EXPECT_EQ(found->how, "the image's ld.so cache");
  // Not in the cache (ldconfig does not look in /usr/local/lib here, and made no link): by file.
  std::filesystem::create_symlink("libmpich.so.12.1.0", image + "/usr/local/lib/libmpich.so.12");
  found = ctr::host::findImageLibrary(root.get(), "libmpich.so.12");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->realPath, "/usr/local/lib/libmpich.so.12.1.0");
  EXPECT_EQ(found->how, "/usr/local/lib");
  EXPECT_FALSE(ctr::host::findImageLibrary(root.get(), "libmpi.so.12"));
  // What the image has, for the error when the host's soname is not there.
  const auto all = ctr::host::findImageMpiLibraries(root.get());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].soname, "libmpi.so.40");
  EXPECT_EQ(all[1].soname, "libmpich.so.12");
  // A symlink out of the image stays in it.
  std::filesystem::create_symlink(dir_ + "/host-file", image + "/usr/local/lib/libmpi.so.20");
  ctr::writeFile(dir_ + "/host-file", "x");
  EXPECT_FALSE(ctr::host::findImageLibrary(root.get(), "libmpi.so.20"));
}

ctr::host::HostFacts someone() {
  ctr::host::HostFacts host;
  host.user.uid = 1000;
  host.user.gid = 1000;
  host.user.name = "alice";
  host.home = host.user.home = "/home/alice";
  host.cwd = "/home/alice";
  host.env = {"HOME=/home/alice"};
  host.squashfsServers = ctr::testing::installedSquashfsServers();
  return host;
}

TEST(MpiPlan, BindPutsTheHostMpiInThePlanWithProvenance) {
  ctr::launch::LaunchOptions o;
  o.image = "/images/app.sif";
  o.args = {"/app"};
  o.mpi = "bind";
  ctr::image::ImageSource image;
  image.path = "/images/app.sif";
  image.kind = ctr::image::ImageKind::Sif;
  auto host = someone();
  host.mpi = ctr::testing::scannedHostMpi();
  ctr::config::Policy policy;
  const auto plan = ctr::launch::planLaunch(o, policy, image, host);
  ASSERT_TRUE(plan.mpi);
  EXPECT_EQ(plan.mpi->check, MpiAbiCheck::Strict);
  ASSERT_EQ(plan.mpi->replace.size(), 1u);
  EXPECT_EQ(plan.mpi->replace[0].soname, "libmpi.so.40");
  EXPECT_EQ(plan.mpi->replace[0].hostPath, "/usr/lib/x86_64-linux-gnu/libmpi.so.40.30.4");
  const auto* dir = ctr::testing::findMount(plan, "/.singularity.d/mpi");
  ASSERT_NE(dir, nullptr);
  EXPECT_EQ(dir->kind, ctr::launch::MountKind::Tmpfs);
  const auto* pal = ctr::testing::findMount(plan, "/.singularity.d/mpi/libopen-pal.so.40");
  ASSERT_NE(pal, nullptr);
  EXPECT_TRUE(pal->readOnly);
  EXPECT_TRUE(pal->required);
  EXPECT_EQ(pal->origin, ctr::launch::MountOrigin::Host);
  EXPECT_EQ(pal->from, "DT_NEEDED of libmpi.so.40: ld.so cache");
  const auto* conf = ctr::testing::findMount(plan, "/etc/openmpi");
  ASSERT_NE(conf, nullptr);
  EXPECT_EQ(conf->source, "/etc/openmpi");
  EXPECT_TRUE(conf->readOnly);
  // Launch-independent: the holder's prepared root has the targets.
  bool prepared = false;
  for (const auto& m : plan.preparedRoot.mounts) prepared = prepared || m.destination == "/.singularity.d/mpi/libopen-pal.so.40";
  EXPECT_TRUE(prepared);
  // First on LD_LIBRARY_PATH (the image's scripts and the user's settings come later).
  EXPECT_EQ(ctr::testing::envOf(plan, "LD_LIBRARY_PATH"), "/.singularity.d/mpi");
  // What the runtime checks against the image's libc.so.6, named for its message.
  const auto needs = ctr::launch::glibcNeeds(plan);
  ASSERT_EQ(needs.size(), 1u);
  EXPECT_EQ(needs[0].what, "host MPI (Open MPI, --mpi=bind)");
  EXPECT_EQ(needs[0].version, "2.34");
  EXPECT_EQ(needs[0].library, "libmpi.so.40");
  const std::string text = ctr::launch::toText(plan);
  EXPECT_NE(text.find("mpi:        bind: the host's Open MPI replaces the image's libmpi.so.40"), std::string::npos) << text;
  EXPECT_NE(text.find("left out: libgone.so.3"), std::string::npos) << text;
  EXPECT_NE(text.find("from DT_NEEDED of libmpi.so.40"), std::string::npos) << text;
  const auto j = ctr::launch::toJson(plan);
  EXPECT_EQ(j["mpi"]["abi_check"], "strict");
  EXPECT_EQ(j["mpi"]["replace"][0]["soname"], "libmpi.so.40");
  EXPECT_EQ(j["mpi"]["needs_glibc"], "2.34");

  policy.mpiAbiStrict = false;
  EXPECT_EQ(ctr::launch::planLaunch(o, policy, image, host).mpi->check, MpiAbiCheck::Relaxed);
}

TEST(MpiPlan, HybridNeedsNothingAndBadValuesOrNoHostMpiAreRefused) {
  ctr::launch::LaunchOptions o;
  o.image = "/images/app.sif";
  o.args = {"/app"};
  ctr::image::ImageSource image;
  image.path = "/images/app.sif";
  image.kind = ctr::image::ImageKind::Sif;
  auto host = someone();
  for (const char* mode : {"", "hybrid"}) {
    o.mpi = mode;
    const auto plan = ctr::launch::planLaunch(o, {}, image, host);
    EXPECT_FALSE(plan.mpi);
    EXPECT_EQ(ctr::testing::findMount(plan, "/.singularity.d/mpi"), nullptr);
    EXPECT_EQ(ctr::testing::envOf(plan, "LD_LIBRARY_PATH"), "<unset>");
  }
  auto errorOf = [&] {
    try {
      (void)ctr::launch::planLaunch(o, {}, image, host);
    } catch (const ctr::Error& e) {
      return e.oneLine();
    }
    return std::string();
  };
  o.mpi = "host";
  EXPECT_NE(errorOf().find("bad --mpi 'host'"), std::string::npos);
  o.mpi = "bind";
  host.mpiMissing = "no host MPI is configured (ctr.conf 'mpi library = libmpi.so.40' names one)";
  EXPECT_EQ(errorOf(), "--mpi=bind: " + host.mpiMissing);
}

TEST(MpiConfig, KeysParseAndRefuseNonsense) {
  auto policy = ctr::config::parsePolicy(
      "mpi library = libmpi.so.40, /opt/ompi/lib/libopen-pal.so.40\nmpi library = libopen-rte.so.40\n"
      "mpi dependency = libucp.so.0\nmpi path = /etc/openmpi, /usr/share/openmpi\nmpi abi check = relaxed\n",
      "test.conf");
  EXPECT_EQ(policy.mpiLibraries, (std::vector<std::string>{"libmpi.so.40", "/opt/ompi/lib/libopen-pal.so.40", "libopen-rte.so.40"}));
  EXPECT_EQ(policy.mpiDependencies, (std::vector<std::string>{"libucp.so.0"}));
  EXPECT_EQ(policy.mpiPaths, (std::vector<std::string>{"/etc/openmpi", "/usr/share/openmpi"}));
  EXPECT_FALSE(policy.mpiAbiStrict);
  EXPECT_TRUE(ctr::config::parsePolicy("", "x").mpiAbiStrict);
  for (const char* bad : {"mpi abi check = loose\n", "mpi path = etc/openmpi\n", "mpi library = lib/libmpi.so.40\n"}) {
    try {
      (void)ctr::config::parsePolicy(bad, "test.conf");
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const ctr::Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("test.conf:1: mpi ", 0), 0u) << e.what();
    }
  }
}

}  // namespace
