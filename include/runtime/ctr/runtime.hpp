// The runtime: executes a LaunchPlan. It decides nothing the plan has not decided.
//
// A launch (execute) does, in its own process, which then *becomes* the app:
//   1. acquire the shared image mount (per node, per user, per image; see below),
//   2. join its user namespace U and mount namespace M (setns),
//   3. assemble the root: join the holder's ready namespace when the prepared root is
//      exactly the plan's root; else unshare a private copy of M and assemble there (the
//      holder's prepared root, else image bind or overlay; default and user binds),
//      pivot_root,
//   4. hand over (no_new_privs, capabilities dropped, seccomp, environment) and execve.
// No supervisor stays behind: signals and the exit status go straight to mpirun/the
// scheduler.
//
// Shared image mount. State lives in a per-user directory (plan.stateDir, mode 0700, owned by
// the user). For each image key K (st_dev, st_ino, mtime, offset, size, driver) a *holder*
// process owns U (the user's uid/gid mapped to themselves, setgroups denied) and M (owned by
// U), in which the image is mounted read-only at <state>/mnt/img on a private tmpfs. The
// image stays mounted while a registered launch process (the app: the process that execs
// it registers, its pid is the app's) lives, plus the linger; processes the app leaves
// behind after it exits are not tracked. No fd of ctr's crosses execve: the app inherits
// only what its caller passed. Lock protocol, so that a SIGKILL at any point leaves nothing
// stale once the others end:
//   launch: flock(K.setup, EX); live holder in K.pid? register with it, else start one and
//           register; release K.setup. Registering: connect to the holder's Unix socket
//           K.sock and send it a pidfd of the launch process (SCM_RIGHTS; no answer is
//           awaited, so a launch pays no round trip to the holder); the holder keeps it
//           if it names the connecting process (SO_PEERCRED: same uid and pid). The
//           launch closes its fds (CLOEXEC); a holder killed meanwhile (its pidfd, taken
//           by findHolder, says so) makes the launch start another.
//   holder: poll K.sock and the registered pidfds; once no registered process lives (and
//           the linger has passed with no registration): if flock(K.setup, EX|NB) and a
//           non-blocking accept finds no registration -> tear down (removing K.sock, K.pid,
//           K.setup under K.setup) and exit; else release K.setup and wait on. A launch
//           registers only under K.setup, so once the holder holds it every registration
//           is done or queued. It never blocks on K.setup: it looks again every 20 ms.
//
// Prepared root. The holder also prepares, in M, a read-only root: the image with the missing
// targets of the plan's launch-independent mounts (plan.preparedRoot, decided by the planner)
// and /etc/passwd and /etc/group generated for plan.preparedRoot.user. A launch whose
// plan.user is the one it was prepared for, with root mode Bind, whose plan mounts over every
// target the holder added and whose targets all exist there, uses it: the plan's Identity
// mounts are satisfied by the prepared root (same user, same image, same content) and are
// not mounted again. The holder also makes the spec's default and admin binds there once
// (listed in <base>/bound): a launch skips those its plan has unchanged, detaches in its own
// copy those its plan lacks, and mounts over the others. Any other launch builds its own
// root exactly as without it. Ready namespace: the holder keeps an nsfs fd of a copy of M
// pivoted into the prepared root, named with its inode in K.pid ("PID USER-INO MNT-INO
// READY-FD READY-INO"); a launch the prepared root fits exactly (nothing to detach, add or
// replace) joins it through /proc/PID/fd/READY-FD instead of copying M. Nothing mounts in it
// after the holder made it.
//
// Holder argv contract (hidden subcommand; also what the setuid helper execs):
//   ctr __holder --state DIR --key K --driver squashfuse|directory|premounted
//                --image PATH [--offset N] [--size N] [--linger-ms N] [--premounted DIR]
//                [--server PATH] [--dataset KEY:OFFSET:PATH]...
//                [--uid-map MAP --gid-map MAP [--newuidmap PATH --newgidmap PATH]]
//                --ready-fd FD
// FD is a socket: the holder first reads the launch's prepared-root spec (JSON, see
// launch::preparedRootToJson) to EOF, then reports exactly one line, "ok" or
// "error: <message>", and closes it. After the last launch of the image ends, the holder
// keeps it mounted N ms (a launch in that window joins it), then tears down.
// With --premounted DIR (driver premounted) the caller has already mounted the image at DIR
// in the holder's current mount namespace (the setuid helper: private mount namespace,
// kernel squashfs, privileges dropped for good, FD left open across its exec); the holder
// then creates U and M itself and binds DIR instead of starting squashfuse.
#pragma once

#include <chrono>
#include <functional>
#include <optional>

#include <cstdint>
#include <string>
#include <vector>

#include "ctr/instance.hpp"
#include "ctr/launch.hpp"

namespace ctr::runtime {

// Runs the plan and replaces the process with the app. Returns only by throwing ctr::Error.
[[noreturn]] void execute(const launch::LaunchPlan& plan);

struct HolderArgs {
  std::string stateDir;
  std::string key;
  std::string driver;       // "squashfuse", "directory" or "premounted"
  std::string image;        // image file (squashfuse) or directory (directory)
  std::uint64_t offset = 0; // squashfs offset inside the image file
  std::uint64_t size = 0;   // squashfs size (0 = to the end)
  std::string premounted;   // driver "premounted": where the image is already mounted
  std::string server;       // the FUSE server (launch::ImageServer) of driver "squashfuse"
                            // and of the datasets
  std::string lazySpec;     // a lazily read image (image::ImageSource::Lazy): the spec the
                            // server (ctr-squashfs) reads its blob by, instead of `image`
  // Dataset images (launch::DatasetImage) as "KEY:OFFSET:PATH": each mounted read-only
  // at <state>/mnt/data/KEY before the holder reports, whatever the driver.
  std::vector<std::string> datasets;
  // Datasets the setuid helper mounted as kernel squashfs, as "KEY:DIR" (DIR the helper's
  // mount point, configured::kHelperRundir/data/I): such a KEY is bound from DIR instead of served.
  std::vector<std::string> premountedDatasets;
  std::uint32_t lingerMs = 0;  // keep the image mounted this long after its last launch
  // ... but not at all where an overlay of the prepared root has the image as its lower
  // layer (a directory image: launch::LaunchPlan::lingerUnlessOverlaid).
  bool lingerUnlessOverlaid = false;
  int readyFd = -1;
  // --fakeroot's holder: its user namespace gets these maps (launch::FakerootMaps, as
  // "INSIDE:OUTSIDE:COUNT,..."; written by newuidmap/newgidmap when those are given),
  // instead of the user's own ids mapped to themselves.
  std::string uidMap, gidMap;
  std::string newuidmap, newgidmap;
};

// The holder: sets up U/M and the image mount, reports on args.readyFd, then waits until
// no launch uses the image any more, tears down and returns the exit status.
int holderMain(const HolderArgs& args);

// argv for `ctr __holder ...` (without the program path).
[[nodiscard]] std::vector<std::string> holderArgv(const HolderArgs& args);

// Key of the plan's image mounted with `driver` in the per-user state directory (16 hex
// digits); a --fakeroot launch's (its maps) and another FUSE server's are other holders'.
[[nodiscard]] std::string imageKey(const launch::LaunchPlan& plan, launch::ImageDriver driver);

// Runs the plan in a child process and waits for it: every signal ctr receives is
// forwarded to it, and the result is the app's exit status, 128+N for a death by signal N
// (a shell's convention), 255 when ctr itself failed (its one-line error on stderr). For
// builds (%post), limits that need cleanup afterwards, and the benchmark harness.
[[nodiscard]] int run(const launch::LaunchPlan& plan);

// Instances (plan.instance; docs/design-slurm.md, section 2). startInstance runs the
// plan's container in the background: a process of its own session (its output in the
// instance's log files) joins the image's holder like any launch and forks the instance's
// PID 1, ctr's init, which assembles the root, hands over, starts the startscript (if the
// image has one) and stays, reaping, until `instance stop`. Once the container is ready,
// it writes the join record and returns it; a failure leaves nothing behind. Under the
// instance's lock: a second start of the same name is refused while the first runs.
// Without a PID namespace (--no-pid), the forked process itself is the keeper. With
// plan.instance->reuse, a running NAME of the same image is returned as it is. `started`
// gets the record once it is written (the CLI prints the join information).
// With plan.instance->stay (--no-pid --stay) nothing is forked: this process becomes the
// keeper and never returns. Once the instance is ready it writes the record in the
// instance's directory (through a descriptor opened on the host), calls `started` (in the
// container, so it may write to its output only), then puts its output on the instance's
// log files and keeps the instance. A failure before that throws, leaving nothing behind.
using InstanceStarted = std::function<void(const launch::InstanceRecord&)>;
launch::InstanceRecord startInstance(const launch::LaunchPlan& plan, const InstanceStarted& started = {});
// The record of the running instance `name`, or nullopt (a record whose keeper has ended
// is removed).
[[nodiscard]] std::optional<launch::InstanceRecord> findInstance(const std::string& stateDir, const std::string& name);
// The user's running instances, by name.
[[nodiscard]] std::vector<launch::InstanceRecord> listInstances(const std::string& stateDir);
// Sends `signal` to the instance's init, which passes it to every process of the instance
// and (SIGTERM, SIGINT, SIGHUP, SIGQUIT) ends once they have; after `timeout`, SIGKILL.
// Returns once the instance's processes have ended and its files are removed; false when
// no such instance runs.
bool stopInstance(const std::string& stateDir, const std::string& name, int signal, std::chrono::seconds timeout);
// What the processes of an instance's PID namespace use now.
struct InstanceStats {
  unsigned processes = 0;
  double cpuSeconds = 0;            // user + system, since each started
  std::uint64_t residentBytes = 0;  // the sum of their resident set sizes
};
[[nodiscard]] InstanceStats instanceStats(const launch::InstanceRecord& record);
// The instance's root file system, the image with what was written to it but none of the
// mounts on it, as a squashfs image `file` (relative: to the working directory), written by
// the host's mksquashfs with every file root's (-all-root) beside it and renamed over it.
// Files the user cannot read are saved empty, with a warning. Throws ctr::Error (one line).
void saveInstance(const launch::InstanceRecord& record, const std::string& file);

// Runs the host program `argv` as root of a build's user namespace (build's id maps; the
// host's file system, no mount changes): how a build unpacks, packs and removes trees whose
// files belong to the mapped ids. Returns its status as a shell reports it.
[[nodiscard]] int runAsBuildRoot(const launch::BuildRoot& build, const std::vector<std::string>& argv);

// Runs `body` in a child process as root of a build's user namespace (as above): how a
// build copies and inspects trees through descriptors where their files belong to the
// mapped ids. Returns what the body returns; a ctr::Error it throws is thrown here with
// the same message.
std::string runAsBuildRoot(const launch::BuildRoot& build, const std::function<std::string()>& body);

}  // namespace ctr::runtime
