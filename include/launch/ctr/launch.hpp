// The launch plan: everything `ctr exec|run|shell` will do, decided up front by a pure
// function of the CLI options, the admin policy, the image and a few host facts. The
// runtime (ctr/runtime.hpp) executes a plan and decides nothing; `--explain` prints it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ctr/binds.hpp"
#include "ctr/cdi.hpp"
#include "ctr/config.hpp"
#include "ctr/environment.hpp"
#include "ctr/gpu.hpp"
#include "ctr/host_facts.hpp"
#include "ctr/identity.hpp"
#include "ctr/image.hpp"
#include "ctr/mpi.hpp"
#include "ctr/oci.hpp"

namespace ctr::launch {

// Instance: `ctr instance start`, whose program is the image's startscript (if any) and
// whose container lives on after it, until `ctr instance stop`.
enum class Command { Exec, Run, Shell, Test, Instance };

// What an --overlay path is on the host (host::inspectOverlayFile looks; the planner decides).
using OverlayKind = host::OverlayFileKind;

// One --overlay PATH[:ro|:rw], as given (parseOverlaySpec).
struct OverlaySpec {
  std::string spec;             // as given
  std::string path;             // absolute, normalized
  bool readOnly = false;        // ":ro"
};

// A spec with what its path is (host.overlayFiles): what the planner stacks.
struct OverlayArg : OverlaySpec, host::OverlayFile {};

// --overlay's spec: PATH, PATH:ro or PATH:rw (relative to `cwd`). Throws ctr::Error for an
// empty path or one that overlayfs's options cannot carry (':' or ',' in it).
[[nodiscard]] OverlaySpec parseOverlaySpec(const std::string& spec, const std::string& cwd);

// What the user asked for on the command line (already split, nothing resolved).
struct LaunchOptions {
  Command command = Command::Exec;
  std::string image;                // IMAGE argument as given
  std::vector<std::string> args;    // exec: CMD ARGS...; run: runscript args; shell: none
  std::vector<std::string> binds;   // --bind/-B values (each may be a comma list)
  std::vector<std::string> envs;    // --env K=V values
  std::vector<EnvVar> envFileVars;  // contents of the --env-file files (the CLI reads them)
  std::string home;                 // --home SRC[:DST]; empty = host $HOME
  std::string pwd;                  // --pwd DIR (inside the container)
  bool imageWorkdir = false;        // --image-workdir: start in the WORKDIR the image records
  bool lazy = false;                // --lazy: an oras:// image's chunks fetched as they are read
  bool contain = false;             // --contain
  bool containAll = false;          // --containall (= contain + cleanenv)
  bool cleanEnv = false;            // --cleanenv
  bool imageEnvFirst = false;       // --image-env-first: the image's variables win (pyxis's rule)
  bool noHome = false;              // --no-home
  // --no-mount LIST (and APPTAINER_NO_MOUNT): Apptainer's names of default mounts to leave
  // out (proc, sys, dev, devpts, home, tmp, hostfs, cwd, bind-paths) or the destination of
  // one default or site bind (/etc/hosts)
  std::vector<std::string> noMount;
  bool writableTmpfs = false;       // --writable-tmpfs
  bool writable = false;            // -w/--writable: a directory image read-write
  std::vector<OverlaySpec> overlays; // --overlay (what each path is: host.overlayFiles)
  limits::Request limits;           // --cpus, --memory, --pids-limit, ... (the CLI parses units)
  std::string statsFile;            // --stats FILE: a JSON record of the run when it ends
  std::vector<std::string> noEnv;   // --no-env NAMES (and APPTAINER_NOENV): host vars not passed
  bool noEval = false;              // --no-eval: user values are not shell-evaluated
  std::vector<std::string> mounts;  // --mount type=bind,source=...,destination=...
  std::string workdir;              // -W/--workdir DIR: host directory for /tmp, /var/tmp, scratch
  std::vector<std::string> scratch; // --scratch DIR: an empty writable directory (comma lists)
  std::string app;                  // --app NAME: a SCIF app (/scif/apps/NAME)
  std::string shell;                // shell -s/--shell PROGRAM
  bool pid = false;                 // -p/--pid: own PID namespace (also with --containall)
  bool noPid = false;               // --no-pid: none (wins over --pid, --containall, instance start)
  bool noInit = false;              // --no-init: in an own PID namespace the app is PID 1 (no ctr init)
  bool ipc = false;                 // -i/--ipc: own IPC namespace (also with --containall)
  bool uts = false;                 // --uts: own UTS namespace (also with --hostname)
  std::string hostname;             // --hostname NAME
  bool net = false;                 // -n/--net: own network namespace
  std::string network;              // --network TYPE (only "none": loopback only)
  bool nv = false;                  // --nv: the host's NVIDIA driver (CDI, else the ld.so cache)
  bool rocm = false;                // --rocm: the host's AMD GPU driver (likewise)
  std::vector<std::string> devices; // --device vendor.com/class=NAME (CDI), repeatable
  bool rdma = false;                // --rdma: /dev/infiniband also with --contain
  std::string gpus;                 // --gpus all|LIST: these NVIDIA GPUs only (implies --nv)
  std::string mpi;                  // --mpi=bind|hybrid ("" = hybrid: the image's own MPI)
  std::string instance;             // instance start: the instance's NAME
  bool reuseInstance = false;       // instance start --reuse: a running NAME of the same image is taken
  bool noStartscript = false;       // instance start --no-startscript: it runs nothing until a launch joins it
  bool stayAsKeeper = false;        // instance start --stay: this ctr keeps the instance (with --no-pid)
  bool instanceRunscript = false;   // instance run: the instance's program is the runscript (run's choices)
  bool fakeroot = false;            // -f/--fakeroot: root in the container (with the ranges of /etc/subuid, /etc/subgid)
  bool ignoreSubuid = false;        // --ignore-subuid: --fakeroot maps the one id, not /etc/subuid's range
  bool noUmask = false;             // --no-umask: the app gets umask 0022, not the caller's
  // --stage (true) / --no-stage (false): copy the image and dataset images to the node's
  // stage directory first, or not; unset: as ctr.conf's 'stage images' says.
  std::optional<bool> stage;
};

// Which namespaces a launch uses and how (the runtime creates exactly these).
struct Namespaces {
  bool sharedUser = true;  // the user namespace of the image's holder (shared per image)
  bool ownMount = true;    // a private copy of the holder's mount namespace
  // The others are the host's unless asked for (MPI and the scheduler need them):
  bool pid = false;        // own PID namespace: a ctr init is PID 1 (forwards signals, reaps)
                           // and the app PID 2; /proc is that namespace's
  bool pidInit = true;     // with pid: ctr's init is PID 1; false (--no-init): the app is, and
                           // gets only the signals it handles, and reaps what it leaves
  bool signalAll = false;  // with pid and its init: each forwarded signal goes to every process
                           // of the namespace, as a terminal's Ctrl-C reaches the whole
                           // foreground job, not to the app alone (a build step: an interrupted
                           // %post ends at once, not when its current command has finished)
  bool ipc = false;        // own IPC namespace (System V IPC, POSIX message queues)
  bool uts = false;        // own UTS namespace, with `hostname` when set
  std::string hostname;
  bool net = false;        // own network namespace: loopback only (brought up)
};

// A GPU driver injected from the ld.so cache (--nv, --rocm without CDI).
struct InjectedDriver {
  host::GpuVendor vendor = host::GpuVendor::Nvidia;
  std::string version;
  // The image's glibc must be at least this (the runtime checks the image's libc.so.6
  // before the app starts, and names both versions when it is older).
  std::string needsGlibc;
  std::string needsGlibcLibrary;
  std::size_t libraries = 0;             // bound into /.singularity.d/libs
  bool scanFromCache = false;            // the scan was read from the state directory's cache
};

// What --nv, --rocm and --device inject, for --explain (the mounts and variables are in the plan).
struct DeviceInjection {
  std::vector<std::string> cdiDevices;   // qualified names resolved
  std::vector<std::string> cdiSpecFiles;
  std::vector<InjectedDriver> drivers;
  std::vector<std::string> notes;        // what was left out and why (hooks, libraries)
};

// Where --mpi=bind puts the host MPI's dependencies (and a second copy of its libraries):
// one directory, first on LD_LIBRARY_PATH, so the prepared root needs one target for all.
inline constexpr std::string_view kContainerMpiDir = "/.singularity.d/mpi";

// One host library that replaces the image's library of the same soname (--mpi=bind).
struct MpiReplacement {
  std::string soname;    // the image's library of this soname (its ld.so cache, else its lib dirs)
  std::string hostPath;  // is covered by this host file (read-only bind onto the image's real file)
  std::string from;      // provenance, for --explain
};

// What --mpi=bind does beyond its mounts. The runtime, once the image's root is assembled
// and before pivot_root, finds each soname in the image (host::findImageLibrary), compares
// the two real file names (host::checkMpiAbi with `check`) and binds the host file over the
// image's; an incompatible pair or an image without the library fails the launch, naming
// both. It decides nothing else: every other mount is in plan.mounts.
struct MpiInjection {
  host::MpiFamily family = host::MpiFamily::Unknown;
  host::MpiAbiCheck check = host::MpiAbiCheck::Strict;
  std::vector<MpiReplacement> replace;
  std::size_t dependencies = 0;          // bound into kContainerMpiDir
  bool scanFromCache = false;            // the host MPI scan was read from the state directory
  std::string needsGlibc;                // the image's glibc must be at least this
  std::string needsGlibcLibrary;
  std::vector<std::string> notes;        // what was left out and why
};

// How the image's root filesystem gets mounted.
enum class ImageDriver {
  Directory,     // a directory on the host: bound, nothing to mount
  Squashfuse,    // squashfuse_ll in the shared user namespace (unprivileged)
  SetuidHelper,  // ctr-mount-helper (kernel squashfs through a loop device)
};

// The one decision of the image driver, used by `ctr exec` (planLaunch) and `ctr check`.
struct DriverDecision {
  ImageDriver driver = ImageDriver::Squashfuse;
  std::string reason;                 // why, for --explain, `ctr check` and the debug log
  // Where the chosen driver cannot proceed at run time (the helper refuses or is busy),
  // the launch falls back to this one with a warning ('image driver = auto' only).
  std::optional<ImageDriver> fallback;
};

// The user's bind specs: $CTR_BIND and Apptainer's variables from `env`, then --bind, in the
// order they apply (for one destination, the later wins); relative sources from `cwd`.
[[nodiscard]] std::vector<BindSpec> userBindSpecs(const LaunchOptions& options, const std::vector<std::string>& env,
                                                  const std::string& cwd);
// Their destinations in Apptainer's order for APPTAINER_BIND in the container: --bind's,
// then the environment's (a nested ctr or Apptainer binds the same paths again).
[[nodiscard]] std::vector<std::string> bindDestinationsForNesting(const LaunchOptions& options,
                                                                  const std::vector<std::string>& env,
                                                                  const std::string& cwd);

// Throws ctr::Error when the policy demands a driver that cannot work here.
[[nodiscard]] DriverDecision decideDriver(const config::Policy& policy, image::ImageKind kind,
                                          const host::HostFacts& host);

enum class MountKind {
  Bind,      // bind `source` (host path) at `destination`
  Tmpfs,     // fresh tmpfs at `destination`
  File,      // `content` (decided by the planner) as a read-only file at `destination`
  Identity,  // `identity`: the image's own /etc/passwd or /etc/group plus plan.user (launch::identityFileText)
  Proc,      // a new procfs (of the container's PID namespace) at `destination`
  Symlink,   // a symbolic link to `source` at `destination` (inside a tmpfs of the plan)
  // A new sysfs (of the container's network namespace: its /sys/class/net shows only its
  // own interfaces) at `destination`; where the kernel refuses one, `source` (the host's
  // /sys) is bound recursively instead, with a warning.
  Sysfs,
};

// Where a mount comes from: shown by --explain; behaviour hangs on the planner's fields
// (`required`, `prebind`, `tmpfsMode`), never on this.
enum class MountOrigin {
  Default,   // Apptainer's default mounts
  Contain,   // --contain's private tmpfs
  Policy,    // ctr.conf 'bind path'
  User,      // --bind, CTR_BIND
  Cwd,       // the current directory (per launch)
  Identity,  // generated /etc/passwd, /etc/group
  Host,      // injected host resources (GPU driver, fabric, MPI)
};

struct Mount {
  MountKind kind = MountKind::Bind;
  std::string source;       // host path (Bind), empty otherwise
  std::string destination;  // absolute path inside the container
  bool readOnly = false;
  bool recursive = true;    // rbind: keep submounts (/proc, /sys, /dev need it)
  // A required mount whose source is missing fails the launch; an optional one is skipped
  // (Apptainer skips absent default and admin binds).
  bool required = false;
  MountOrigin origin = MountOrigin::Default;
  std::string content;      // File only
  IdentityFile identity = IdentityFile::Passwd;  // Identity only: which file
  // Bind only: the runtime creates the source directory (as the user, with this mode)
  // when it is missing (--workdir's tmp, var_tmp and scratch directories).
  std::optional<unsigned> createSourceMode;
  // Tmpfs only: the mode of its root (01777 for /tmp, 0755 for /dev) and, when set, its
  // size limit in bytes (a tmpfs that only holds mount targets needs little).
  unsigned tmpfsMode = 0700;
  std::optional<std::uint64_t> tmpfsSizeBytes;
  // The image's holder makes this mount once in the prepared root (ctr/runtime.hpp), where
  // every launch with the same mount reuses it; else each launch makes it.
  bool prebind = false;
  // Host mounts: where the planner got it ("nvliblist.conf libcuda.so: ld.so cache
  // libcuda.so.1 (libc6,x86-64)", "/etc/cdi/nvidia.yaml:12 device 0"), for --explain.
  std::string from;
};

// Run, shell and test start the first of these whose program is executable in the
// container (Apptainer's order); the user's arguments follow its own.
struct CommandChoice {
  std::vector<std::string> argv;  // absolute program and its own arguments
  std::vector<EnvVar> env;        // set when this one is chosen (SHELL for a shell)
  std::string note;               // said (at warning level) when this one is chosen
};

// When none of the choices exists: what to say, and the exit status (0: a report only).
struct NoCommand {
  std::string message;
  int status = 1;
};

// How the container's "/" is built from the mounted image.
enum class RootMode {
  Bind,             // the image itself, read-only; a mount target it lacks is made at run
                    // time in an underlay (kUnderlayMaxEntries) of the deepest directory
                    // the image has on the target's path, or an overlay of that directory
  Overlay,          // overlayfs: image below, plan.overlay's layers above it
  Sandbox,          // a build step: the writable sandbox directory itself (plan.build)
  Writable,         // --writable: the directory image itself, read-write (missing targets made in it)
  Join,             // a running instance's: the launch enters its namespaces (plan.join)
};

// A mount target the image lacks (RootMode::Bind) is made without laying an overlay over
// the whole image, whose permission and revalidation on every path component cost a third
// of the warm small-file rate (benchmark-guide.md): the deepest directory the image has on
// the target's path becomes a read-only tmpfs holding the target and, bound read-only from
// the image, that directory's entries (symlinks copied), when it has at most this many
// (Apptainer's "underlay"); else an overlay of that directory alone.
inline constexpr std::size_t kUnderlayMaxEntries = 64;

// One --overlay directory over the image. A writable one holds the overlayfs upper layer in
// upper/ and its work directory in work/ (Apptainer's layout); a read-only one is stacked as
// a lower layer: its upper/ when it has one (the layer a writable use left), else itself.
struct OverlayLayer {
  std::string path;        // the --overlay directory (absolute)
  bool writable = false;
  std::string dir;         // the layer: PATH/upper (writable, and read-only when present), else PATH
  std::string workDir;     // writable: PATH/work (overlayfs's own, on the upper's file system)
  // Writable: PATH, upper/ and work/ are created (as the user) when missing.
  bool create = false;
  // A squashfs or SIF overlay image: read-only, `dir` is the holder's mount of it (a
  // plan.datasets entry); nothing to lock, the image cannot change.
  bool image = false;
  // An ext3 overlay image (`ctr overlay create`, Apptainer's): its file system, at `offset`
  // in the file `path`, is mounted by fuse2fs for this launch alone (read-only with :ro);
  // `dir` and `workDir` are then "upper" and "work" inside that mount. `path` is locked
  // like a directory's (flock on the file), and fuse2fs holds the lock until it has flushed.
  struct Ext3 {
    std::uint64_t offset = 0;
    std::uint64_t size = 0;
  };
  std::optional<Ext3> ext3;
};

// What stacks the layers: the kernel's overlayfs, or (when a layer is an ext3 image, which
// only a FUSE server can mount unprivileged, and the kernel's overlayfs in a user namespace
// takes no FUSE upper layer) fuse-overlayfs, run for this launch alone as fuse2fs is.
enum class UnionDriver { Kernel, FuseOverlayfs };
[[nodiscard]] std::string_view toString(UnionDriver driver);

// At most this many --overlay layers (each costs the image's holder an fd while the
// container lives: the lock below).
inline constexpr std::size_t kMaxOverlayLayers = 16;

// The layers of an Overlay root, over the image. Each layer's PATH is locked (flock) while
// the container lives, by the image's holder on the launch's behalf: exclusively for the
// writable one, shared for the read-only ones, so one writer has a directory to itself and
// no reader sees it change underneath.
struct RootOverlay {
  // Top first: the writable layer (at most one), then the read-only ones in the order given.
  std::vector<OverlayLayer> layers;
  // With no writable layer: --writable-tmpfs's private tmpfs is the upper layer (changes
  // kept in memory); else, none: the root is read-only.
  bool tmpfsUpper = false;
  UnionDriver driver = UnionDriver::Kernel;
  // FuseOverlayfs: a process of the container the kernel has killed (SIGKILL pending, as
  // after a fatal SIGTERM) but that has waited this long in an uninterruptible sleep is
  // stuck on the launch's FUSE servers (a server that stopped answering): they are then
  // aborted, so the container ends instead of waiting forever. 0: no watchdog.
  std::chrono::seconds stuckServerGrace{0};
  [[nodiscard]] bool hasExt3() const {
    for (const auto& l : layers)
      if (l.ext3) return true;
    return false;
  }
  [[nodiscard]] const OverlayLayer* writable() const {
    return !layers.empty() && layers.front().writable ? &layers.front() : nullptr;
  }
};

// Instances (docs/design-slurm.md, section 2): a container that outlives `instance start`
// and that later launches join. Its files, in the user's state directory: instances/NAME.json
// (the join record, launch::InstanceRecord), NAME.lock (held while it is started or
// stopped), NAME.out and NAME.err (the keeper's and the startscript's output).
struct InstancePlan {
  std::string name;
  std::string dir;         // <state>/instances
  std::string record;      // <dir>/NAME.json
  std::string lock;        // <dir>/NAME.lock
  std::string logOut, logErr;
  std::string seccomp;     // <dir>/NAME.bpf: the compiled filter, for joins outside ctr (Slurm)
  // <dir>/NAME.join: instanceJoinInfo against the start environment (the changes that apply
  // to any joiner's environment), for joins outside ctr that do not run ctr to find it (a
  // Slurm job's later steps in its named container).
  std::string join;
  // --reuse: an instance NAME that already runs, of the same image, is taken as it is (a
  // Slurm job's named container, started by its first step, joined by the next).
  bool reuse = false;
  // The image's startscript runs in it (else, --no-startscript, nothing runs until a launch
  // joins: a Slurm step's container, whose tasks are the work).
  bool startscript = true;
  bool runscript = false;  // instance run: the runscript (run's choices) instead of the startscript
  // --stay (with --no-pid): the ctr process itself becomes the keeper, not a process it
  // forks: once the instance is ready it writes the record, prints the join information,
  // closes its standard output and error and stays. For a caller that reaps it and removes
  // its files if it is killed (the Slurm plugin's unnamed step container, whose keeper
  // slurmstepd kills at the step's end); the fork, and the copy-on-write faults of two
  // processes that follow it, are not paid.
  bool stay = false;
};

// One namespace of a running instance: /proc/PID/ns/<type> of its keeper, and the inode
// it had when the instance started (a recycled pid is not the keeper).
struct JoinNamespace {
  std::string type;  // "user", "mnt", "ipc", "uts", "net", "pid"
  std::uint64_t inode = 0;
};

// What a launch into a running instance does (exec|run|shell instance://NAME), in order:
// check the keeper is the recorded process (start time, namespace inodes), enter each
// namespace with setns (user first, then mount, which makes the container's root and
// "/" the launch's), and, with a PID namespace, fork into it (the launch stays outside as
// the app's stand-in). The hand-over is the plan's, as for any launch.
struct JoinPlan {
  std::string name;
  std::string record;                    // the join record it came from
  pid_t keeper = 0;                      // the instance's PID 1, as the host sees it
  std::uint64_t keeperStart = 0;         // its start time (clock ticks after boot)
  std::vector<JoinNamespace> namespaces; // setns order
  // The instance's cgroup directories (started with limits): the launch enters them first,
  // so that the limits cover it too.
  std::vector<std::string> cgroups;
};

// A user namespace in which the caller is root ("fakeroot"): a build step's, and a
// --fakeroot launch's (its image's holder makes it).
struct FakerootMaps {
  std::vector<host::IdRange> uidMap, gidMap;
  // The maps are written by newuidmap/newgidmap (subordinate ranges); otherwise directly
  // (one id, setgroups denied, or the caller is root).
  bool mapHelpers = false;
  std::string newuidmap, newgidmap;   // their paths, when mapHelpers
  std::string mapNote;                // why these maps, for --explain and failure messages

  bool operator==(const FakerootMaps&) const = default;
};

// How a build step (%post, %test while building) gets its root and its identity: a private
// user namespace with these maps, in which the caller is root, over a writable directory.
struct BuildRoot : FakerootMaps {
  std::string sandbox;                // host directory: the container's root, read-write
  std::string stageDir;               // an empty host directory the runtime mounts its stage on
};

enum class BuildSection { Post, Test };

struct BuildStepOptions {
  BuildSection section = BuildSection::Post;
  std::string sandbox;                // the stage's rootfs
  std::string stageDir;               // empty directory in the build's temporary directory
  std::vector<std::string> argv;      // deffile::scriptCommand of the section
  std::vector<std::string> hostEnv;   // the caller's environment (TERM, http_proxy, ... kept)
  // %test with build --writable-tmpfs: its writes go to a tmpfs over the tree, then vanish.
  bool writableTmpfs = false;
};

// The root the image's holder prepares once and every launch of this user and image can
// reuse (ctr/runtime.hpp): the targets of the mounts every launch makes, created where the
// image lacks them, and the identity files for `user`. The planner decides the list.
struct PreparedRootSpec {
  std::vector<Mount> mounts;  // the launch-independent mounts (not user binds), plan order
  host::HostUser user;              // identity files are built for this user
};

// The host's kernel interfaces that a container of the host's root could otherwise write:
// the sysctls (/proc/sys), the magic SysRq key, IRQ affinities, bus and file-system knobs
// under /proc, and /sys with the cgroup tree (where a root app could leave its limits' cgroup).
// Read-only binds in plan.mounts, as runc and Apptainer make them, unless ctr.conf says
// 'root kernel interfaces = writable'. An ordinary user's container needs none: the kernel
// does not let that user write them.
inline constexpr std::string_view kReadOnlyKernelPaths[] = {"/proc/sys", "/proc/sysrq-trigger", "/proc/irq",
                                                            "/proc/bus", "/proc/fs"};
struct KernelInterfaces {
  bool readOnly = false;  // the binds of kReadOnlyKernelPaths and /sys are read-only
  std::string reason;     // why, for --explain
};

// The last steps before the program starts, as the runtime applies them.
struct Handover {
  bool seccomp = true;            // install the filter of plan.seccompProfile (builds: none, as Apptainer)
  bool keepCapabilities = false;  // a build step's root keeps them (dpkg chowns files); else all dropped
  bool noNewPrivs = true;         // PR_SET_NO_NEW_PRIVS: no setuid program gains privilege
  // --no-umask (and --compat): the app starts with this umask instead of the caller's.
  std::optional<unsigned> umask;
};

// Which launches share the image's holder: those in this launch's process-tracking cgroups.
// The holder starts in the cgroups of the launch that starts it, and a batch system ends a
// job step's (or a job's) processes by their cgroup (Slurm's proctrack/cgroup: the v1
// freezer controller; on v2 the unified tree): a holder shared with another job or step
// would be killed under that one's running apps, whose root would then be gone (SIGBUS).
// Slurm's per-task cgroups (task_N) are left out, so that the tasks of a step share one.
// Outside a batch system all launches are in the same cgroups and share as before.
// Nor is a holder shared across mount namespaces: its namespace is a copy of the one it
// started in, so a launch from another (a Slurm job's private /tmp without cgroups, a
// session's pam_namespace, unshare -m) would see that one's mounts in place of its own.
struct HolderScope {
  std::string freezer;  // the v1 freezer cgroup ("/slurm/uid_1000/job_7/step_0"), if mounted
  std::string unified;  // the v2 cgroup ("/user.slice/..."), if any
  std::string mountNamespace;  // host::HostFacts::mountNamespace ("mnt:[4026531841]")
};
[[nodiscard]] HolderScope planHolderScope(const std::map<std::string, std::string>& ownCgroups,
                                          const std::string& mountNamespace);

// The FUSE server that mounts a squashfs image for the squashfuse driver (docs/design-io.md):
// ctr-squashfs (multithreaded) or squashfuse_ll, chosen by ctr.conf's 'squashfs server'.
struct ImageServer {
  std::string program;  // absolute path
  std::string reason;   // why this one, for --explain
};

// A dataset image (--bind FILE:DST:image-src=PATH, docs/design-io.md section 3): the image's
// holder mounts it read-only at `mountDir` with the plan's image server before it reports,
// so every launch of the node with the same image and datasets shares one mount; the
// launch binds mountDir + PATH at DST (a plan Mount of origin User).
// At most this many dataset and overlay images per launch: each is two holder arguments (and
// two more to the setuid helper, which takes at most 128 and mounts at most HP_MAX_DATASETS:
// src/helper/helper_parse.h).
inline constexpr std::size_t kMaxDatasetImages = 16;

// ctr.conf's execution control for an image file the launch mounts (docs/design-signing.md,
// section 2): the rule that took it and the keys that signed it. A launch the rule refuses has no plan: the
// planner throws its one line.
struct ExecutionCheck {
  std::string ruleDir;                 // "": the rule for every image
  config::ExecutionMode mode = config::ExecutionMode::Off;
  std::string image;                   // the image's real path, which chose the rule
  std::vector<std::string> signers;    // trusted keys (keyids, fingerprints) that signed it
  bool cached = false;                 // the verdict kept for this file, not read again
};

struct DatasetImage {
  std::string source;        // the bind's source, as BindSpec has it
  image::ImageSource image;  // the squashfs or SIF file, resolved by the CLI
  std::string key;           // 16 hex digits of its identity (file, offset, size)
  std::string mountDir;      // <state>/mnt/data/KEY, in the holder's mount namespace
  // Kernel squashfs through the setuid helper (with the image: only a launch whose image
  // goes through the helper) or the image server (planDatasetDrivers), and why.
  ImageDriver driver = ImageDriver::Squashfuse;
  std::string driverReason;
  std::optional<ExecutionCheck> execution;  // set when an execution rule took the file
};

// Node-local staging (docs/design-io.md section 4): an image or dataset image copied from a
// shared file system to the node's stage directory once, and mounted from there. The
// runtime makes (or finds) each copy before it joins the image's holder (image::stage::
// ensure: one copier per node and user, the others wait; size and mtime checked); the plan's
// image and dataset paths already name the copies, their identities (the holder's key)
// stay the sources'.
struct StagedFile {
  std::string what;       // "the image", "--bind SRC:DST:image-src=PATH", "--overlay SPEC"
  std::string source;     // the file on the shared file system
  std::string copy;       // its copy in the stage directory (what is mounted)
  std::uint64_t bytes = 0;
  std::int64_t mtimeNs = 0;
  std::string reason;     // why: --stage, 'stage images = always', on NFS ('stage images = auto')
};
struct Staging {
  std::string dir;                // ctr.conf 'stage dir', %u expanded
  std::uint64_t maxBytes = 0;     // 'stage max size'
  std::vector<StagedFile> files;
};

// A glibc version that an injected host component needs of the image: the runtime checks
// the image's libc.so.6 against each before the app starts, naming both versions.
struct GlibcNeed {
  std::string what;     // "NVIDIA driver 535.104.05", "host MPI (Open MPI, --mpi=bind)"
  std::string version;  // "2.34"
  std::string library;  // the injected library that needs it
};

// The check of the image's glibc against what the injected host components need: the
// needs, and where the image's libc.so.6 may be (the first that exists is read).
struct GlibcCheck {
  std::vector<GlibcNeed> needs;
  std::vector<std::string> imageLibc;
};

struct LaunchPlan {
  Command command = Command::Exec;
  image::ImageSource image;
  ImageDriver driver = ImageDriver::Squashfuse;
  std::string driverReason;
  std::optional<ImageDriver> driverFallback;  // see DriverDecision
  // Set when the driver, or its fallback, is squashfuse, or there are dataset images.
  std::optional<ImageServer> imageServer;
  std::vector<DatasetImage> datasets;  // in the order of their first bind
  std::optional<Staging> staging;      // the image and datasets copied to the node first
  GlibcCheck glibcCheck;                // before the app starts (empty: nothing to check)
  // A registry image (docker://, oras://): where its manifests and blobs are fetched from,
  // in order (ctr.conf's mirrors, then the registry unless a mirror says `only`).
  std::vector<image::oci::Endpoint> registryEndpoints;
  RootMode rootMode = RootMode::Bind;
  // The assembled root is made read-only: the image's (an overlay ctr lays only to hold
  // mount targets must not take writes), or a build's %test tree.
  bool rootReadOnly = false;
  RootOverlay overlay;                  // root mode Overlay: the layers over the image
  std::vector<Mount> mounts;            // applied in this order, after the root
  PreparedRootSpec preparedRoot;        // what the holder prepares (subset of `mounts`)
  std::vector<std::string> environment; // final container environment "K=V" (before env scripts)
  // The program that applies the environment in the container (ctr/environment.hpp,
  // envProgramScript): what the user set (CTRENV_/APPTAINERENV_, --env-file, --env), applied
  // after the image's env scripts up to 99-base.sh, evaluated unless --no-eval; ctr's and
  // Apptainer's identity variables (CTR_CONTAINER, APPTAINER_NAME, ...), set again after the
  // image's scripts, which cannot change them; $UID, $GID and the shell's PS1. The runtime
  // adds only what it finds in the root: the scripts (with sourceEnvScripts) and the
  // variables of the command it chose.
  EnvProgram envProgram;
  std::vector<std::string> warnings;    // settings ignored, with why (printed at launch)
  std::vector<std::string> mountsLeftOut;  // --no-mount: the default mounts not made ("/proc")
  // exec: the command (argv[0] looked up with the container PATH); run, shell, test: the
  // arguments after the chosen program's own.
  std::vector<std::string> argv;
  std::vector<CommandChoice> commandChoices;  // run, shell, test (empty for exec)
  NoCommand noCommand;                  // when no choice is executable
  // --app NAME: the app's directory (/scif/apps/NAME), which the image must have; without
  // it the launch fails with status 1, as an Apptainer image's 95-apps.sh exits
  std::string appRoot;
  bool sourceEnvScripts = true;         // apply /.singularity.d/env/*.sh if the image has them
  std::string workdir;                  // inside the container
  bool workdirRequired = false;         // --pwd given: a missing one fails (else: warning, /)
  std::optional<ExecutionCheck> execution;  // set when an execution rule took the image
  // --image-workdir: the file in the image that records its WORKDIR (image::oci::
  // kWorkdirFile); the launch starts there when the image has it, else in `workdir`.
  // "": not asked.
  std::string imageWorkdirFile;
  host::HostUser user;                        // for the container's passwd/group (home = container home)
  std::string seccompProfile;           // empty = built-in default
  Handover handover;
  Namespaces namespaces;
  std::string stateDir;                 // per-user runtime state: the one the runtime uses
  // After the last launch of the image ends, its holder keeps it mounted this long, so that
  // the next launch in a script or workflow joins it (ctr.conf 'image linger').
  std::uint32_t lingerMs = 0;
  // A directory image's holder (issue 56): it lingers only where no overlay has the
  // directory as its lower layer (which must not change under it: lingerUnlessOverlaid),
  // and its key holds these paths of the directory as they are (holderKeyPaths: the
  // prepared root's targets and every directory above them, whose entries an underlay
  // copies, and the sources of the identity files), so that a change starts a new holder.
  bool lingerUnlessOverlaid = false;
  std::vector<std::string> holderKeyPaths;
  HolderScope holderScope;  // which launches share the image's holder (part of its key)
  // Resource limits and where their cgroup goes (backend None: no cgroup is created).
  limits::Request limits;
  limits::Placement cgroup;
  // With 'refuse overcommit': the node's capacity, against which the runtime admits the
  // launch (its request plus what the running limited containers beside it reserved), under
  // a lock, right before it creates the cgroup.
  std::optional<limits::NodeCapacity> admitAgainst;
  std::string statsFile;                // --stats FILE (the runtime supervises the app)
  std::optional<DeviceInjection> devices;  // --nv, --rocm, --device
  std::optional<MpiInjection> mpi;         // --mpi=bind
  std::optional<BuildRoot> build;       // a build step: private user namespace, sandbox root
  // --fakeroot: the image's holder (one of its own: the maps are in its key) makes its user
  // namespace with these maps, so the launch, joining it, is root there, and the image's
  // root-owned files are its own (an overlay can copy them up); plan.user is root.
  std::optional<FakerootMaps> fakeroot;
  std::optional<InstancePlan> instance; // instance start: the container is kept, not exec'd
  std::optional<JoinPlan> join;         // root mode Join: the running instance entered
  KernelInterfaces kernelInterfaces;    // /proc/sys, /sys, ...: read-only for the host's root
  // Whether the launch needs a supervisor (limits or --stats): run(plan), not execute(plan).
  [[nodiscard]] bool supervised() const { return cgroup.backend != limits::Backend::None || !statsFile.empty(); }
};

// The plan's needs: of each ld.so-cache driver (--nv, --rocm) and of the host MPI.
[[nodiscard]] std::vector<GlibcNeed> glibcNeeds(const LaunchPlan& plan);
// The needs and the places of the image's libc (plan.glibcCheck).
[[nodiscard]] GlibcCheck planGlibcCheck(const LaunchPlan& plan);


// What planLaunch will need to know of the node beyond the caller (`host`, discoverHost's:
// the binds of the environment, the current directory), for host::discoverNeeds. Pure.
[[nodiscard]] host::Needs needsOf(const LaunchOptions& options, const image::ImageSource& image,
                                  const config::Policy& policy, const host::HostFacts& host);
// What `ctr build` needs: the user's subordinate ranges, for the build's root.
[[nodiscard]] host::Needs needsOfBuild();

// The pure planner. Throws ctr::Error (one line) for bad options: bad bind specs, user
// binds refused by policy, relative --pwd, user namespaces disabled by policy, ...
[[nodiscard]] LaunchPlan planLaunch(const LaunchOptions& options, const config::Policy& policy,
                                    const image::ImageSource& image, const host::HostFacts& host);

// The id maps of a namespace in which the caller is root: 0 is the caller, 1.. the
// subordinate ranges when it has both (written by newuidmap/newgidmap), else nothing else.
[[nodiscard]] FakerootMaps planFakerootMaps(const host::HostFacts& host, const host::SubordinateIds& subordinate);

// The identity of a build's root (id maps and how they are written), for the build steps
// and for what the builder runs in the same namespace (unpacking, packing, cleaning up).
[[nodiscard]] BuildRoot planBuildRoot(const host::HostFacts& host, const host::SubordinateIds& subordinate);

// A build step's plan (see docs/architecture.md, "Builds"): pure, from the options, the
// caller and its subordinate ids. Throws ctr::Error when the policy forbids user namespaces.
[[nodiscard]] LaunchPlan planBuildStep(const BuildStepOptions& options, const config::Policy& policy,
                                       const host::HostFacts& host, const host::SubordinateIds& subordinate);

[[nodiscard]] std::string toString(Command command);
[[nodiscard]] std::string toString(ImageDriver driver);
[[nodiscard]] std::string toString(MountKind kind);
[[nodiscard]] std::string toString(RootMode mode);
[[nodiscard]] std::string toString(MountOrigin origin);

// The prepared-root spec as the launch sends it to the image's holder, and back.
[[nodiscard]] std::string preparedRootToJson(const PreparedRootSpec& spec);
[[nodiscard]] PreparedRootSpec preparedRootFromJson(std::string_view json);

// --explain output.
[[nodiscard]] std::string toText(const LaunchPlan& plan);
[[nodiscard]] nlohmann::json toJson(const LaunchPlan& plan);
// The limits as --explain --json and --stats write them.
[[nodiscard]] nlohmann::json toJson(const limits::Request& limits);

}  // namespace ctr::launch
