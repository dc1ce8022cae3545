// The admin's policy: etc/ctr.conf ("key = value" lines, '#' comments) parsed into a typed
// value. Unknown keys and bad values are errors naming the file and line.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "ctr/limits.hpp"

namespace ctr::config {

enum class ImageDriver { Auto, Setuid, Squashfuse };
// Which FUSE server serves a squashfs image without the helper: ctr's multithreaded
// ctr-squashfs where installed (auto), or the one-threaded squashfuse_ll.
enum class SquashfsServer { Auto, CtrSquashfs, Squashfuse };
// Which images and dataset images a launch copies to the node first ('stage images'):
// never (unless --stage), those on a network file system (auto), or all (always).
enum class StageImages { Never, Auto, Always };
// Whether a launch runs a site store's image where it lies (never, the default: a node's
// first launch costs what a cached one does) or copies it to the node's image cache first
// ('image store copy'; auto: where the store is on a network or parallel file system).
enum class StoreCopy { Never, Always, Auto };

// A 'registry mirror' entry: `registry` (host[:port]; docker.io for Docker Hub) is fetched
// from `location` ([http[s]://]host[:port][/path]) first, as containers' registries.conf
// mirrors are; with `only`, never from the registry itself.
struct RegistryMirror {
  std::string registry;
  std::string location;
  bool only = false;
};

// 'lazy images': which images `ctr exec --lazy` may read lazily (PullPolicy below).
enum class LazyImages { No, Registry, All };

// What `ctr pull` and the image bootstraps of `ctr build` accept from a registry or an image
// archive, so that a hostile image cannot fill the disk or keep the node busy: every blob is
// cut off once it passes its declared size, and these bound the rest.
struct PullPolicy {
  // 'pull max blob size': one layer or blob as fetched (compressed).
  std::uint64_t maxBlobBytes = std::uint64_t{16} << 30;
  // 'pull max total size': all the layers of one image together, as fetched.
  std::uint64_t maxTotalBytes = std::uint64_t{64} << 30;
  // 'pull max unpacked size': what the layers of one image (or an image archive) unpack to,
  // the decompressed tar stream and the apparent size of its files (a sparse file counts whole).
  std::uint64_t maxUnpackedBytes = std::uint64_t{128} << 30;
  // 'pull token realm hosts': hosts (host or host:port) besides the registry's own that may
  // issue its bearer tokens; Docker Hub's registry-1.docker.io takes them from auth.docker.io.
  std::vector<std::string> tokenRealmHosts{"auth.docker.io"};
  // 'image cache dir': where pulled layers and the images `exec docker://REF` packs are
  // kept; %u is the user's id. Empty: $XDG_CACHE_HOME/ctr, else
  // ~/.cache/ctr. $CTR_CACHE_DIR, the user's own choice, wins over both.
  std::string cacheDir;
  // 'image cache max size': the cached images together; the least recently used go first.
  std::uint64_t cacheMaxBytes = std::uint64_t{20} << 30;
  // 'registry mirror' (repeatable): tried in the order given, before the registry itself.
  std::vector<RegistryMirror> mirrors;
  // 'image store dir': the site image store (ctr/image_store.hpp), one directory every node
  // reads; empty: none. 'image store copy': see StoreCopy. 'image store wait': how long a
  // launch waits for another node's launch that fills the entry it needs.
  std::string storeDir;
  StoreCopy storeCopy = StoreCopy::Never;
  int storeWaitSeconds = 1800;
  // Lazily read images (`ctr exec --lazy`, docs/design-io.md section 6): 'lazy images' says
  // which may be (no: none, they are pulled whole; registry: oras:// images with a chunk
  // table; all: those, and http(s):// URLs of SIFs with a chunk table beside them), 'lazy cache dir' where each user's node cache is (%u: the user's id), 'lazy
  // prefetch' whether the image's server fetches the chunks not read yet while the link is
  // idle, until the image is whole, 'lazy cache max size' what one user's node cache may hold
  // (a launch removes the least recently used images to make room for its own).
  LazyImages lazyImages = LazyImages::Registry;
  std::string lazyCacheDir = "/var/tmp/ctr-lazy-%u";
  bool lazyPrefetch = true;
  std::uint64_t lazyCacheMaxBytes = std::uint64_t{20} << 30;
  // 'lazy unverified = allow': an image without a chunk table (pushed by Apptainer) is read
  // lazily too, its chunks unchecked until the whole blob is checked once all are cached
  // (weaker: a job may read bytes that later fail); refuse (default): it is pulled whole.
  bool lazyUnverified = false;
  // The ctr.conf these came from, for the messages that name a key; empty = built-in defaults.
  std::string configFile;
};

// Execution control (docs/design-signing.md, section 2): which images may run by who signed
// them. 'execution rule = [DIR] MODE' (repeatable; the longest DIR an image's path is under
// picks the rule, one without DIR is for every other image): off, whitelist (every signature
// of the SIF verifies with the trusted keys), whitestrict (and every trusted key signed it),
// blacklist (no signature verifies with a blacklisted key). 'trusted key = FILE' and
// 'blacklisted key = FILE' (repeatable): PEM public keys (DSSE) or OpenPGP public keys.
enum class ExecutionMode { Off, Whitelist, Whitestrict, Blacklist };
struct ExecutionRule {
  std::string dir;  // absolute, no trailing slash; empty: every image no other rule takes
  ExecutionMode mode = ExecutionMode::Off;
};
struct ExecutionControl {
  std::vector<ExecutionRule> rules;
  std::vector<std::string> trustedKeys;
  std::vector<std::string> blacklistedKeys;
};

struct Policy {
  std::filesystem::path source;  // file the policy was read from; empty = built-in defaults

  // Kernel squashfs through the setuid helper (ctr-mount-helper). Off unless the admin says so.
  bool allowSetuid = false;
  // Unprivileged user namespaces (needed for every launch; the helper only mounts).
  bool allowUserNamespaces = true;
  // Whether users may --bind arbitrary host paths (admin default binds always apply).
  bool allowUserBinds = true;
  // How ctr mounts images: auto = helper when installed and allowed, else squashfuse.
  ImageDriver imageDriver = ImageDriver::Auto;
  SquashfsServer squashfsServer = SquashfsServer::Auto;

  // Helper policy: where images it mounts may live (empty = anywhere), who may own them
  // (user names; "self" = the invoking user), which formats it accepts, and how many loop
  // devices it may attach for one user and for all users together (src/helper/helper_parse.c
  // parses the same keys with the same defaults).
  std::vector<std::string> setuidImageDirectories;
  std::vector<std::string> setuidImageOwners{"root"};
  std::vector<std::string> setuidFormats{"sif", "squashfs"};
  int maxLoopDevices = 64;
  int maxLoopDevicesTotal = 256;

  // How long an image stays mounted after its last launch ends ('image linger', seconds in
  // ctr.conf), so that the next launch of a script, job step or workflow task joins it.
  std::uint32_t imageLingerMs = 5000;

  // Node-local staging (docs/design-io.md section 4): 'stage dir' (%u is the user's id)
  // holds the node-local copies of images and dataset images, made once per node and
  // reused; 'stage images' says which a launch stages without --stage; past 'stage max
  // size' the least recently used copies go.
  std::string stageDir = "/var/tmp/ctr-stage-%u";
  StageImages stageImages = StageImages::Never;
  std::uint64_t stageMaxBytes = std::uint64_t{20} << 30;

  // Bind specs ("src[:dst[:ro|rw]]") added to every container.
  std::vector<std::string> defaultBinds;
  // Seccomp profile file; empty = the built-in default profile.
  std::string seccompProfile;

  // Caps on one container's --cpus, --memory and --pids-limit ('max cpus', 'max memory',
  // 'max pids'); a request over a cap is refused with the numbers.
  limits::Caps limitCaps;
  // 'refuse overcommit': refuse a launch whose --cpus or --memory, added to what the running
  // limited containers beside it reserved, exceeds the node.
  bool refuseOvercommit = false;
  // A cgroup v2 directory the admin delegates to users ('cgroup delegate'; "%u" is the uid):
  // limits go into a new cgroup below it. Empty: systemd's user@UID.service where present.
  std::string cgroupDelegate;
  // Where CDI specifications are read, in order of rising priority ('cdi spec dirs').
  std::vector<std::string> cdiSpecDirs{"/etc/cdi", "/var/run/cdi"};
  // --nv on a node without the NVIDIA driver: an error, or a warning and no GPU
  // ('missing gpu driver = error | warn'; warn suits images run on mixed partitions).
  bool missingGpuDriverIsError = true;
  // The list of driver programs and libraries for --nv without CDI ('nvidia library list');
  // empty = nvliblist.conf beside the ctr.conf in use.
  std::string nvidiaLibraryList;
  // /dev/infiniband (the verbs and RDMA CM devices) in --contain's private /dev as well
  // ('rdma with contain'); without --contain /dev is the host's and has them anyway.
  bool rdmaWithContain = false;
  // The same for --rocm ('rocm library list'); empty = rocmliblist.conf beside ctr.conf.
  std::string rocmLibraryList;
  // The host MPI --mpi=bind injects (repeatable keys, comma lists): 'mpi library' names the
  // libraries that replace the image's (a soname looked up in the ld.so cache, or an absolute
  // path), 'mpi dependency' libraries they load that DT_NEEDED does not show (dlopen'd),
  // 'mpi path' configuration files and directories bound at the same path (/etc/openmpi).
  std::vector<std::string> mpiLibraries;
  std::vector<std::string> mpiDependencies;
  std::vector<std::string> mpiPaths;
  // 'mpi abi check = strict | relaxed' (ctr/mpi.hpp): strict refuses an image whose MPI
  // library has a higher minor version than the host's; relaxed warns and goes on.
  bool mpiAbiStrict = true;
  // 'root kernel interfaces = read-only | writable': whether containers of the host's root
  // get /proc/sys, /proc/sysrq-trigger, /proc/irq, /proc/bus, /proc/fs and /sys (the cgroup
  // tree with it) read-only (launch::KernelInterfaces).
  bool rootKernelInterfacesReadOnly = true;

  PullPolicy pull;
  ExecutionControl execution;
};

// Parses `text`; `fileName` is only used in error messages ("FILE:LINE: ...").
Policy parsePolicy(std::string_view text, const std::string& fileName);
// Every key parsePolicy takes, in order (the setuid helper's twin parser is tested against it).
[[nodiscard]] std::vector<std::string> knownKeys();

// Reads and parses `path`. A missing file gives the built-in defaults (source left empty).
Policy loadPolicy(const std::filesystem::path& path);

// The policy ctr uses: $CTR_CONFIG if set, else the ctr.conf of its install (relative to
// the executable, else the configured path: ctr/install_paths.hpp). Unprivileged code only: the
// setuid helper always reads the compiled-in path.
Policy loadDefaultPolicy();

std::string_view toString(ImageDriver driver);
std::string_view toString(SquashfsServer server);
std::string_view toString(StageImages stage);
std::string_view toString(ExecutionMode mode);
// The rule for an image at `realPath` (symlinks resolved): the one of the longest DIR it
// lies under, else the one without DIR; nullptr when none applies (execution control off).
[[nodiscard]] const ExecutionRule* executionRuleFor(const ExecutionControl& control, std::string_view realPath);

}  // namespace ctr::config
