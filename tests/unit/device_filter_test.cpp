// The cgroup v2 device filter, for real: as root, on a cgroup2 mount, a child in a cgroup
// with the filter cannot open the denied device and can open the others.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "child_helper.hpp"
#include "ctr/device_filter.hpp"
#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "platform_probes.hpp"

namespace {

// The cgroup2 mount point, empty if there is none.
std::string cgroup2Mount() {
  std::ifstream mounts("/proc/self/mounts");
  for (std::string line; std::getline(mounts, line);) {
    std::istringstream words(line);
    std::string source, target, type;
    words >> source >> target >> type;
    if (type == "cgroup2") return target;
  }
  return "";
}

TEST(DeviceFilter, DeniesExactlyTheListedDevicesInACgroupV2) {
  if (::geteuid() != 0) CTR_SKIP_BECAUSE("needs root (BPF device programs and a cgroup v2 directory)");
  const std::string mount = cgroup2Mount();
  if (mount.empty()) CTR_SKIP_BECAUSE("no cgroup2 file system is mounted");
  const std::string dir = mount + "/ctr-device-filter-test-" + std::to_string(::getpid());
  if (::mkdir(dir.c_str(), 0755) != 0)
    CTR_SKIP_BECAUSE("cannot make a cgroup v2 directory at " + dir + ": " + std::strerror(errno));
  struct Cleanup {
    std::string dir;
    ~Cleanup() { ::rmdir(dir.c_str()); }
  } cleanup{dir};
  ctr::UniqueFd dirFd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(dirFd);
  try {
    // /dev/zero is c 1:5; /dev/null (c 1:3) must stay usable.
    ctr::runtime::attachDeviceDenyFilter(dirFd.get(), {{'c', 1, 5, "/dev/zero"}});
  } catch (const ctr::Error& e) {
    if (std::string(e.what()).find("Operation not permitted") != std::string::npos ||
        std::string(e.what()).find("Invalid argument") != std::string::npos)
      CTR_SKIP_BECAUSE(std::string("this kernel refuses BPF device programs here: ") + e.what());
    FAIL() << e.what();
  }
  const std::string verdict = ctr::test::inChild([&]() -> std::string {
    std::ofstream(dir + "/cgroup.procs") << "0";
    const int zero = ::open("/dev/zero", O_RDONLY | O_CLOEXEC);
    if (zero >= 0) return "/dev/zero opened despite the filter";
    if (errno != EPERM) return std::string("/dev/zero: ") + std::strerror(errno) + ", not EPERM";
    const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null < 0) return std::string("/dev/null refused: ") + std::strerror(errno);
    ::close(null);
    return "";
  });
  EXPECT_EQ(verdict, "");
}

}  // namespace
