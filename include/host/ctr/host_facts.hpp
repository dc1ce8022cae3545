// What the node offers the caller, as plain data: every probe of the node that `ctr exec`,
// `ctr build` and `ctr check` make, gathered once into HostFacts (src/host/host_facts.cpp,
// host_user.cpp, node_support.cpp). The planner (src/launch) only reads the result; nothing
// here decides what a launch does.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ctr/cdi.hpp"
#include "ctr/config.hpp"
#include "ctr/gpu.hpp"
#include "ctr/image.hpp"
#include "ctr/limits.hpp"
#include "ctr/mpi.hpp"
#include "ctr/signers.hpp"

namespace ctr::host {

// the caller (host_user.cpp)

struct HostGroup {
  gid_t gid = 0;
  std::string name;  // empty when the host has no name for it (the gid is then left out)

  bool operator==(const HostGroup&) const = default;
};

struct HostUser {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string name;
  std::string gecos;
  std::string home;
  std::string shell;
  HostGroup primaryGroup;           // gid and its name
  std::vector<HostGroup> groups;    // supplementary groups, primary excluded

  bool operator==(const HostUser&) const = default;
};

// Whether NSS answers `database` ("passwd", "group") from the /etc files first and stops
// there when they hold the entry: its one line in `nsswitch` (nsswitch.conf's text) names
// "files" first, with no action after it that could change SUCCESS=return. False when the
// line is absent (glibc's built-in default applies) or appears twice.
[[nodiscard]] bool filesAnswerFirst(std::string_view nsswitch, std::string_view database);

// The first entry for `uid` in a passwd file's text, read as NSS's files service reads it
// (glibc's own parser; only lines whose uid field reads as `uid` are parsed): fills the
// user's name, gecos, home and shell, or returns false.
[[nodiscard]] bool passwdEntryFromText(std::string_view passwd, uid_t uid, HostUser& user);

// For each gid of `names` still without a name: the name of its first entry in a group
// file's text, read the same way.
void groupNamesFromText(std::string_view group, std::map<gid_t, std::string>& names);

// The calling user: getuid/getgid/getgroups, then the passwd and group entries. Where
// filesAnswerFirst holds, entries are read from /etc/passwd and /etc/group with glibc's own
// parser (what NSS would return, without its nscd probes and per-lookup set-up); anything
// the files lack goes through getpwuid_r/getgrgid_r (LDAP, sssd, systemd). When the host has no
// passwd entry (a uid from a container-less scheduler, broken LDAP) it falls back to
// name "uid<N>", $HOME or "/", shell "/bin/sh", rather than failing the launch.
// NSS lookups may reach LDAP: call it once per launch, never per rank in a loop.
// `answeredByFiles`, when given, says whether /etc/passwd and /etc/group answered everything.
[[nodiscard]] HostUser lookupHostUser(bool* answeredByFiles = nullptr);

// One line of /proc/PID/uid_map or gid_map: `count` ids from `inside` map to `outside`.
struct IdRange {
  std::uint32_t inside = 0;
  std::uint32_t outside = 0;
  std::uint32_t count = 0;

  friend bool operator==(const IdRange&, const IdRange&) = default;
};

// The caller's subordinate ids (/etc/subuid, /etc/subgid): the first range of each, if any.
struct SubordinateIds {
  std::optional<IdRange> uids;  // inside = 0 (unused), outside = first id, count
  std::optional<IdRange> gids;
};

// "NAME-or-UID:START:COUNT" lines of /etc/subuid or /etc/subgid: the first range for the
// user (by name or by id), or nullopt. Malformed lines are skipped, as shadow-utils does.
[[nodiscard]] std::optional<IdRange> parseSubordinateRange(std::string_view text, std::string_view name,
                                                           std::uint32_t id);
// /etc/subuid and /etc/subgid read for `user` (a missing or unreadable file: no range).
[[nodiscard]] SubordinateIds discoverSubordinateIds(const HostUser& user);

// what the node supports (node_support.cpp)

// The installed setuid helper (configured::kHelperPath), as stat(2) shows it. Only Usable is
// ever used: a helper that is setuid root but writable by group or others could be
// replaced by anyone who can write it, so ctr refuses it (and `ctr check` says so).
enum class HelperState { Missing, NotSetuidRoot, Writable, Usable };
[[nodiscard]] HelperState inspectSetuidHelper(const std::string& path);

// /dev/fuse as the caller can use it.
enum class FuseState { Missing, NotAccessible, Usable };
[[nodiscard]] FuseState inspectFuse();

// Whether mounts the host makes later reach this process's mount namespace, and with it a
// running launch's (the holder's namespace is a slave of the caller's, mount_namespaces(7)):
// they do where the root mount is shared (systemd's default) or a slave, not where it is
// private. Read from the last mountinfo line whose mount point is "/" (the one on top).
enum class RootPropagation { Shared, Slave, Private, Unknown };
[[nodiscard]] RootPropagation rootPropagationOf(std::string_view mountinfo);
[[nodiscard]] RootPropagation inspectRootPropagation();  // /proc/self/mountinfo

// Whether user `user` can read the file at `path`, by the mode bits of the file and of each
// directory on its path (real where the caller can resolve it; as owner, as a member of a
// group of the user's, or as others; root reads anything). ACLs and LSMs are not read. For
// the keys of ctr.conf's execution rules, which the helper's check reads as its own user.
struct Readability {
  enum { Readable, Unreadable, Unknown } answer = Readable;
  std::string why;  // Unreadable: what stops the user; Unknown: what stopped the caller
};
[[nodiscard]] Readability readabilityFor(const std::string& path, const std::string& user);

// The processes that run as user `user` now, by their real, effective or saved user id, each
// as "PID (COMMAND)", as far as /proc shows them (hidepid hides other users' processes);
// nullopt where there is no such user. For the helper's check user: any of them could trace
// the check (same user) into an "allow".
[[nodiscard]] std::optional<std::vector<std::string>> processesRunningAs(const std::string& user);

// A real unshare(CLONE_NEWUSER) in a forked child: the sysctls do not tell about LSMs
// (AppArmor's restrict_unprivileged_userns, SELinux) or seccomp filters around us.
// Returns 0 or the errno of the unshare (EAGAIN when no child could be forked).
[[nodiscard]] int probeUserNamespace();

// the launch's facts (host_facts.cpp)

// What the limits decisions need to know about the node (read only when asked for).
struct LimitsHost {
  limits::CgroupMounts mounts;               // /proc/self/mountinfo
  limits::NodeCapacity capacity;             // CPUs, memory nodes, MemTotal
  std::string delegated;                     // the delegated v2 directory, if any
  bool delegatedWritable = false;            // ... and the user may create cgroups in it
};

// The FUSE servers that can serve a squashfs image, as findProgram finds them (empty where
// missing, with findProgram's one line on why in `missing`).
struct SquashfsServers {
  std::string ctrSquashfs;  // ctr's multithreaded server (libexec/ctr/ctr-squashfs)
  std::string squashfuse;   // squashfuse_ll
  std::string ctrSquashfsMissing;
  std::string squashfuseMissing;
};
// Which of them to look for (each search is a walk over ctr's directories and $PATH).
struct ServerSearch {
  bool ctrSquashfs = false;
  bool squashfuse = false;
  // squashfuse_ll only where ctr-squashfs was not found ('squashfs server = auto').
  bool squashfuseOnlyAsFallback = false;
  [[nodiscard]] bool any() const { return ctrSquashfs || squashfuse; }
};
[[nodiscard]] SquashfsServers discoverSquashfsServers(const ServerSearch& search);

// the files a launch names (host_files.cpp)

// A file the options name, and how a message names where it came from ("--overlay SPEC",
// "--bind SPEC").
struct NamedFile {
  std::string path;  // absolute
  std::string label;
};

// What an --overlay path is: a directory (with upper/ or not), an image the image reader
// takes (squashfs, SIF), an ext2/3/4 image (by its superblock's magic number, or a SIF's
// ext3 overlay partition), or nothing.
enum class OverlayFileKind { Missing, Directory, Squashfs, Sif, Ext3, Other };
struct OverlayFile {
  OverlayFileKind kind = OverlayFileKind::Missing;
  bool hasUpperDir = false;                 // Directory: it has upper/ (a writable overlay's layout)
  std::optional<image::ImageSource> image;  // Squashfs, Sif: the image, resolved
  // Ext3: where its file system lies in the file (0 and the file's size, or a SIF's ext3
  // overlay partition: the descriptor's offset and size).
  std::uint64_t ext3Offset = 0;
  std::uint64_t ext3Size = 0;
};
// Throws ctr::Error, named by file.label, when the path cannot be looked at (not when it
// is missing: a writable overlay directory is created).
[[nodiscard]] OverlayFile inspectOverlayFile(const NamedFile& file);
// A dataset image (--bind FILE:DST:image-src=PATH): its kind, squashfs offset and size and
// identity. Throws ctr::Error, named by file.label, for a directory or a file that is not one.
[[nodiscard]] image::ImageSource inspectDatasetFile(const NamedFile& file);

// Execution control's facts of one image file: where it really is (which chooses the rule),
// and who signed it when a rule other than off takes that path (config::executionRuleFor).
struct SignedFile {
  std::string realPath;
  std::optional<image::SignatureFacts> signatures;
};

// What the planner needs to know about the caller; gathered once by discoverHost().
struct HostFacts {
  HostUser user;                    // uid, gid, groups and their names (lookupHostUser)
  bool userFromFiles = false;       // ... all of it from /etc/passwd and /etc/group (no NSS service)
  std::string home;                 // $HOME, else the passwd entry
  std::string cwd;                  // getcwd
  std::vector<std::string> env;     // the caller's environment, "K=V"
  std::string runtimeDir;           // $XDG_RUNTIME_DIR (may be empty)
  std::string stateDir;             // chooseStateDir(): the one the runtime will use
  std::string stageDir;             // discoverStageDir(): 'stage dir', or the user's own one beside it
  // What decides the image driver (decideDriver), probed cheaply (stat/access).
  HelperState setuidHelper = HelperState::Missing;  // inspectSetuidHelper(configured::kHelperPath)
  bool helperConfigSafe = false;       // ctr.conf owned by root, not group/other-writable
  bool loopControl = false;            // /dev/loop-control exists
  // The image's file system when the helper refuses it ("FUSE", "vfat", ...: the list is
  // src/helper/untrusted_fs.h, the helper's own), else empty (discoverImageFilesystem).
  std::string imageUntrustedFs;
  pid_t pid = 0;                       // the launcher's pid (names its cgroup)
  // This process's cgroups (ownCgroups): which launches share an image's holder
  // (launch::planHolderScope), and below which a limited launch's cgroup goes.
  std::map<std::string, std::string> cgroups;
  // This process's mount namespace (/proc/self/ns/mnt, "mnt:[4026531841]"): a holder made in
  // another one shows that one's mounts (launch::planHolderScope).
  std::string mountNamespace;
  // Gathered only for a squashfs image (discoverSquashfsServers).
  SquashfsServers squashfsServers;
  // Gathered only when a launch asks for limits or --stats (discoverLimitsHost).
  std::optional<LimitsHost> limits;
  // Gathered only for --nv and --device (discoverDevicesHost).
  std::optional<CdiRegistry> cdi;    // the specs of policy.cdiSpecDirs
  std::optional<GpuDriver> nvidia;   // the ld.so cache scans (--nv, --rocm without a CDI spec)
  std::optional<GpuDriver> amd;
  std::string nvidiaMissing;         // why there is no scan (no driver loaded, ...)
  std::string amdMissing;
  // For --gpus: each NVIDIA GPU's device nodes (/dev/nvidiaN from the scan, or the nodes of
  // CDI device "N"), by index, with the numbers the host's nodes have (stat): what the
  // device cgroup denies for the GPUs left out. A node that is not a device (a fixture's
  // plain file) is absent.
  std::map<unsigned, std::vector<limits::DeviceRule>> gpuDeviceNodes;
  // Gathered only for --mpi=bind (discoverMpiHost): the configured host MPI, or why not.
  std::optional<HostMpi> mpi;
  std::string mpiMissing;
  // Gathered only for --fakeroot (discoverSubordinateIds).
  std::optional<SubordinateIds> subordinate;
  // The files the options name, by path (inspectOverlayFile, inspectDatasetFile).
  std::map<std::string, OverlayFile> overlayFiles;
  std::map<std::string, image::ImageSource> datasetImages;
  // Execution control (Needs::signatureImage): each image file the launch mounts (the image,
  // dataset and overlay images), by its path: discoverSignedFile's answer.
  std::map<std::string, SignedFile> signedFiles;
};

// Which devices a launch asks for (--nv, --rocm, --gpus, --device).
struct DeviceAsk {
  bool nvidia = false;  // --nv
  bool amd = false;     // --rocm
  bool gpus = false;    // --gpus: the GPUs' device nodes, for the device cgroup
  bool cdi = false;     // --device: CDI devices
};

// What a launch needs probed beyond the caller: the planner's answer (launch::needsOf, pure),
// which discoverNeeds probes. Each probe runs only when named.
struct Needs {
  // The file system of the image file, for the setuid helper's refusal (discoverImageFilesystem).
  std::string imageFile;
  ServerSearch squashfsServers;  // a squashfs image, dataset or overlay image: its FUSE servers
  bool limits = false;           // limits, --stats or --gpus: the node's cgroups (discoverLimitsHost)
  DeviceAsk devices;             // --nv, --rocm, --gpus, --device (discoverDevicesHost)
  bool mpi = false;              // --mpi=bind (discoverMpiHost)
  bool stageDir = false;         // the image may be staged (discoverStageDir)
  bool subordinateIds = false;   // --fakeroot with the user's /etc/subuid ranges
  std::vector<NamedFile> overlayFiles;  // --overlay paths
  std::vector<NamedFile> datasetFiles;  // the image-src= files of the user's binds
  // ctr.conf's execution control has rules: who signed this image, and the dataset and
  // overlay images above (discoverSignedFile).
  std::optional<image::ImageSource> signatureImage;
};

// The one entry for a launch's facts after discoverHost: fills in `host` what `needs` names,
// with the settings of `policy` that say where to look.
void discoverNeeds(HostFacts& host, const Needs& needs, const config::Policy& policy);

// An image file's real path, and when an execution rule takes it, who signed it (a verdict
// kept in `stateDir` for the file as it is, else verified now). Throws ctr::Error for a
// trusted or blacklisted key file that cannot be read.
[[nodiscard]] SignedFile discoverSignedFile(const image::ImageSource& image, const config::ExecutionControl& control,
                                            const std::filesystem::path& stateDir);

// This process's cgroup per v1 controller and on v2 (/proc/self/cgroup, limits::parseProcCgroup).
[[nodiscard]] std::map<std::string, std::string> ownCgroups();

// This process's mount namespace, as /proc/self/ns/mnt names it ("mnt:[4026531841]"); empty
// where it cannot be read.
[[nodiscard]] std::string ownMountNamespace();

// Host facts for the calling process (lookupHostUser, getcwd, environ, the setuid helper).
[[nodiscard]] HostFacts discoverHost();

// The per-user state directory, chosen once (the plan carries it; the runtime opens exactly
// that one): $XDG_RUNTIME_DIR/ctr when $XDG_RUNTIME_DIR is a directory owned by the user,
// else the first of /tmp/ctr-<uid>, /tmp/ctr-<uid>.1 .. .15 that is missing or owned by the
// user (anyone can create those names first). When all are taken, the user's own
// /tmp/ctr-<uid>-XXXXXX (ctr/user_dir.hpp, chooseUserDir: found again by later launches,
// made by the first, the one case in which this creates anything; `uid` must then be the
// caller's). Empty only when that fails: the runtime then uses a private directory of its
// own for the launch (no sharing between launches). With LastResort::No, empty instead of
// that last resort: nothing is created and nothing logged.
enum class LastResort { Yes, No };
[[nodiscard]] std::string chooseStateDir(uid_t uid, const std::string& runtimeDir, LastResort lastResort = LastResort::Yes);

// The node's cgroup file systems, this process's cgroups, CPUs and memory, and the delegated
// cgroup v2 directory for `uid` (`delegate` from ctr.conf, "%u" replaced; else systemd's
// user@UID.service when it exists).
[[nodiscard]] LimitsHost discoverLimitsHost(uid_t uid, const std::string& delegate);

// The CDI specs and, for --nv (--rocm) without a CDI spec for nvidia.com/gpu (amd.com/gpu),
// the driver scan (cached in host.stateDir). Errors of a scan are kept in
// host.nvidiaMissing / amdMissing: the planner decides, by policy, whether they stop the
// launch. Nothing is probed when nothing is asked for.
void discoverDevicesHost(HostFacts& host, const DeviceAsk& ask, const config::Policy& policy);

// The files and directories whose state discoverDevicesHost's answer for `ask` comes from,
// where a cached scan stands for the libraries (the launch memo's inputs): for --nv the
// driver's version file, the ld.so cache and the library list the scan cache is keyed by,
// the scan cache itself, /dev (the device nodes) and the CDI spec directories; under
// CTR_HOST_ROOT where host.env sets it. Reads the driver's version (the cache's name).
// Empty for --rocm, --gpus and --device, which the memo does not keep.
[[nodiscard]] std::vector<std::string> deviceInputFiles(const DeviceAsk& ask, const config::Policy& policy,
                                                        const HostFacts& host);

// For --mpi=bind: the host MPI of ctr.conf ('mpi library', 'mpi dependency', 'mpi path')
// resolved through the host's ld.so cache (CTR_HOST_ROOT: a fixture tree, as for --nv).
// A failure is kept in host.mpiMissing: the planner reports it.
void discoverMpiHost(HostFacts& host, const config::Policy& policy);

// Gathered for launches that may stage: ctr.conf's 'stage dir' for this user, or where
// another user took that name, the user's own directory beside it (chooseUserDir: the one
// case in which looking creates a directory).
void discoverStageDir(HostFacts& host, const config::Policy& policy);

// The image's file system, when the setuid helper would refuse it (host.imageUntrustedFs):
// one statfs, only where the helper is installed and the image is a file.
void discoverImageFilesystem(HostFacts& host, const std::string& imagePath, bool imageIsDirectory);
// The name of a file system (statfs f_type) the setuid helper refuses images from
// (src/helper/untrusted_fs.h), or empty.
[[nodiscard]] std::string untrustedFilesystemName(std::int64_t statfsType);

}  // namespace ctr::host
