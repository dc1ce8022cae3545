// runtime::run(plan): a real container (the busybox demo image as a directory) run to its
// end in a child, with its exit status, its signal death and a forwarded signal reported the
// way a shell reports them. Needs root or user namespaces with overlayfs; skips otherwise.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "ctr/config.hpp"
#include "ctr/image.hpp"
#include "ctr/launch.hpp"
#include "ctr/runtime.hpp"
#include "platform_probes.hpp"

namespace {

struct DemoImage {
  std::string dir;
  DemoImage() {
    char tmpl[] = "/tmp/ctr-run-plan.XXXXXX";
    dir = ::mkdtemp(tmpl);
    const std::string cmd = "sh '" CTR_SOURCE_DIR "/images/demo/make-rootfs.sh' '" + dir + "/root' >/dev/null 2>&1";
    ok = std::system(cmd.c_str()) == 0;
  }
  ~DemoImage() { std::filesystem::remove_all(dir); }
  bool ok = false;
};

ctr::launch::LaunchPlan planFor(const std::string& image, std::vector<std::string> argv) {
  ctr::launch::LaunchOptions options;
  options.image = image;
  options.args = std::move(argv);
  options.contain = true;  // nothing of the test's cwd or home needed
  ctr::config::Policy policy;
  policy.imageLingerMs = 0;
  return ctr::launch::planLaunch(options, policy, ctr::image::resolveImage(image), ctr::host::discoverHost());
}

}  // namespace

TEST(RunPlan, ReturnsTheAppsStatusSignalDeathAndForwardsSignals) {
  if (::access("/bin/busybox", X_OK) != 0) CTR_SKIP_BECAUSE("busybox (for the demo image) is not installed");
  DemoImage demo;
  if (!demo.ok) CTR_SKIP_BECAUSE("could not build the demo image");
  const std::string image = demo.dir + "/root";
  auto probe = ctr::runtime::run(planFor(image, {"true"}));
  if (probe != 0) CTR_SKIP_BECAUSE("containers cannot start here (user namespaces or overlayfs refused: status " + std::to_string(probe) + ")");

  EXPECT_EQ(ctr::runtime::run(planFor(image, {"sh", "-c", "exit 7"})), 7);
  EXPECT_EQ(ctr::runtime::run(planFor(image, {"sh", "-c", "kill -KILL $$"})), 128 + SIGKILL);
  EXPECT_EQ(ctr::runtime::run(planFor(image, {"no-such-command"})), 255) << "ctr's own failure";

  // A SIGTERM sent to the caller while run() waits reaches the container.
  sigset_t term, old;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &term, &old), 0);  // inherited by the thread below
  std::thread sender([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ::kill(::getpid(), SIGTERM);
  });
  int status = ctr::runtime::run(planFor(image, {"sh", "-c", "trap 'exit 9' TERM; sleep 5 & wait"}));
  sender.join();
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  EXPECT_EQ(status, 9);
}
