// What an IMAGE argument is, and where its root filesystem lives: the one entry point the
// runtime uses to turn a path into something it can mount. Recognises a SIF (its primary
// system partition), a plain squashfs file, a Singularity 2 image (.simg: squashfs after a
// "#!/usr/bin/env run-singularity" line) and a directory.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ctr::image {

enum class ImageKind { Sif, Squashfs, Directory };

struct ImageSource {
  std::filesystem::path path;  // absolute path as given by the user, made absolute
  ImageKind kind = ImageKind::Directory;
  // For Sif and Squashfs: where the squashfs filesystem lies inside the file.
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::string arch;  // Go arch name of the SIF primary partition ("amd64"); empty if unknown
  // Text of the SIF's environment object (Env.Vars, "K=V" lines), empty if it has none.
  std::string environment;
  // A SIF's ext3 overlay partition (Apptainer's embedded overlay, `ctr overlay create
  // IMAGE.sif`): where its file system lies in the file; size 0 when it has none.
  std::uint64_t overlayOffset = 0;
  std::uint64_t overlaySize = 0;
  // A SIF whose squashfs is not its primary system partition (resolveDataImage): a data set.
  bool dataPartition = false;
  // Identity of the file, the key of the per-node mount cache (stat of the opened file).
  dev_t device = 0;
  ino_t inode = 0;
  std::int64_t mtimeNs = 0;
  std::int64_t ctimeNs = 0;  // with the above, what a kept signature verdict is for
  // The file's own size (a SIF is more than its squashfs) and the statfs type of the file
  // system it is on: what node-local staging copies and checks, and whether 'stage images =
  // auto' copies it (a network file system).
  std::uint64_t fileBytes = 0;
  std::int64_t filesystem = 0;
  // Its owner, link count and mode: what the setuid helper's policy looks at ('setuid image
  // owners'; a file with another name is refused; under an execution rule, a file others may
  // write), so the planner can predict it.
  uid_t owner = 0;
  std::uint64_t links = 1;
  std::uint32_t mode = 0644;
  // A registry image run from the image cache (ctr/image_cache.hpp): the docker:// reference
  // given and its manifest's digest; `path` is then the cached SIF. Empty otherwise.
  std::string reference;
  std::string digest;
  std::string via;  // where the SIF came from (image::cache::Acquired::via)
  // An oras:// image read lazily (`ctr exec --lazy`, docs/design-io.md section 6): `path` is
  // then the node cache's data file of its blob, of which only the chunks fetched so far are
  // there (the SIF's header, descriptors and small objects, fetched while resolving it), and
  // its identity is the blob's (no times: the file grows as chunks arrive).
  struct Lazy {
    std::string spec;      // the spec file ctr-squashfs reads (lazy::specText), 0600
    std::string url;       // where the chunks come from
    std::string log;       // where its server logs a chunk that failed
    std::uint64_t chunks = 0;  // chunks in the chunk table, each checked before use (verified)
    std::uint64_t cached = 0;  // of them, in the node cache when the launch looked
    bool prefetch = false;     // the server fetches the rest while the link is idle
    bool verified = true;      // false: no table ('lazy unverified = allow'), the whole checked once cached
  };
  std::optional<Lazy> lazy;
};

// Opens `path` and works out what it is. Throws ctr::Error with a one-line message naming
// the path and the problem: missing, unreadable, not an image at all, malformed SIF, SIF
// without a primary squashfs partition, ...
ImageSource resolveImage(const std::filesystem::path& path);

// A data image (--bind FILE:DST:image-src=PATH, Apptainer's image mounts): as resolveImage,
// but a SIF without a primary system partition serves its first squashfs partition of
// another type (a data set packed with `sif new` and `sif add --parttype 3`).
ImageSource resolveDataImage(const std::filesystem::path& path);

// Whether the file `fd` has the SIF magic at byte 32 (what makes it a SIF, not what makes
// it a valid one: sif::Image::open checks the rest).
bool hasSifMagic(int fd);

// The fields of a squashfs superblock (its first 96 bytes, little-endian) that ctr reads.
struct SquashfsSuperblock {
  static constexpr std::size_t kBytes = 96;
  std::uint32_t blockSize = 0;
  std::uint16_t compression = 0, major = 0, minor = 0;
  std::uint64_t bytesUsed = 0;       // where the file system ends
  std::uint64_t inodeTableStart = 0; // where its tables begin, after the data
};
// The superblock in `bytes`; nullopt when they are fewer than 96 or lack the magic "hsqs".
std::optional<SquashfsSuperblock> decodeSquashfsSuperblock(std::span<const std::uint8_t> bytes);

// "squashfs 4.0, lz4 compressed, data block size 131072": the superblock at `offset` of
// `fd`, as mksquashfs sums it up; empty when there is none.
std::string describeSquashfs(int fd, std::int64_t offset = 0);

// "sif", "squashfs", "directory"
std::string toString(ImageKind kind);

// What `ctr build` does: DIR -> squashfs -> SIF (see docs/user-guide-images.md).
struct PackOptions {
  std::filesystem::path output;  // the SIF to write
  std::filesystem::path rootfs;  // directory tree to pack
  bool force = false;            // replace an existing output
  bool deterministic = false;    // nil UUID, sentinel times, reproducible squashfs
  // Definition builds (ctr/build.hpp): the SIF's definition object (else the tree's
  // /.singularity.d/Singularity) and its JSON.Generic "inspect-metadata.json" object
  // (`apptainer inspect --json --labels --deffile` of the image; none when empty).
  std::string definition;
  std::string inspectMetadataJson;
  // Runs mksquashfs (its argv) and returns its exit status; empty: as the caller. A
  // definition build runs it as the build's root instead.
  std::function<int(const std::vector<std::string>&)> runMksquashfs;
  // Every file owned by root in the image (mksquashfs -all-root): what an unprivileged
  // build does, whose own ids mean nothing on another node. Setuid/setgid bits are then
  // cleared: a caller's own setuid file must not become root's. Unset: when unprivileged.
  std::optional<bool> allRoot;
  // A definition build installs its own SIGINT/SIGTERM cleanup around the whole build.
  bool installSignalCleanup = true;
  // --mksquashfs-args: more mksquashfs options, after ctr's (-comp lz4, -b 1M, ...).
  std::vector<std::string> mksquashfsArgs;
  // The partition's architecture (a Go name: amd64, arm64, ...): a pulled image's own, which
  // `pull --arch` may make another than the host's. Empty: the host's.
  std::string arch;
};

// Builds the SIF, writing only temporary files next to the output until a final rename.
// Temporary files are removed on any error and on SIGINT/SIGTERM/SIGHUP. Throws ctr::Error.
// Returns the squashfs's summary (describeSquashfs).
std::string packSif(const PackOptions& options);

// The unsquashfs command that unpacks `source`'s squashfs into `dest` (which may exist).
// Only real root may write extended attributes outside user.* (security.selinux, which
// images built on SELinux hosts carry): for anybody else only the user.* ones are
// unpacked, as Apptainer does, instead of failing on the first file carrying another.
std::vector<std::string> unsquashfsCommand(const ImageSource& source, const std::string& dest);

// `ctr build OUT.sif IMAGE.sif`: the image's squashfs unpacked (unsquashfs) into a temporary
// directory next to the output and packed again with `options` (rootfs is ignored).
void repackImage(const std::filesystem::path& image, const PackOptions& options);

// `ctr build --sandbox DIR IMAGE`: the image's squashfs unpacked into the new directory
// DIR (replaced with `force`), by way of a scratch directory beside it. Unless
// `keepPrivilegedFiles`, setuid/setgid bits, file capabilities and device nodes are dropped:
// a sandbox stays on the host. Returns what was dropped.
struct PrivilegedFiles;
PrivilegedFiles unpackToSandbox(const std::filesystem::path& image, const std::filesystem::path& output, bool force,
                                bool keepPrivilegedFiles);

// `build --update --sandbox DIR IMAGE`: the image unpacked over the existing directory DIR,
// as Apptainer updates a sandbox from an image: its files replace DIR's, the files only
// DIR has stay. Privileged files dropped as unpackToSandbox does.
PrivilegedFiles unpackOverSandbox(const std::filesystem::path& image, const std::filesystem::path& sandbox,
                                  bool keepPrivilegedFiles);

// One partition or object of an image, for `ctr inspect`.
struct ObjectSummary {
  std::uint32_t id = 0;
  std::string type;  // siftool's type text, e.g. "FS (Squashfs/*System/amd64)"
  std::string name;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
};

// What `ctr inspect` shows: metadata of the image and of its /.singularity.d.
struct ImageMetadata {
  ImageSource source;
  nlohmann::json labels = nlohmann::json::object();
  std::string deffile;
  std::string runscript;
  std::map<std::string, std::string> environment;  // file name -> content
  std::vector<ObjectSummary> objects;              // SIF only
  nlohmann::json sifInspectMetadata;               // JSON.Generic inspect-metadata.json, if any

  [[nodiscard]] nlohmann::json toJson() const;
};

// Reads the metadata without mounting (unsquashfs -cat for squashfs content).
ImageMetadata inspectImage(const std::filesystem::path& path);

// `apptainer inspect`'s view of an image. What one scope holds: the image's /.singularity.d
// or a SCIF app's /scif/apps/NAME/scif. Contents lose their trailing newlines, as in
// Apptainer; an empty member means the image has no such file.
struct ScopeAttributes {
  std::map<std::string, std::string> environment;  // path in the image -> content
  std::map<std::string, std::string> labels;       // non-string values as their JSON text
  std::string runscript;
  std::string startscript;
  std::string test;
  std::string helpfile;  // runscript.help
};

// Which parts `ctr inspect` reads (Apptainer's flags; see docs/user-guide-images.md).
struct ApptainerQuery {
  bool labels = false;
  bool deffile = false;
  bool runscript = false;
  bool startscript = false;
  bool test = false;
  bool environment = false;
  bool helpfile = false;
  bool listApps = false;
  bool all = false;  // every part of the image and of every app; `app` is ignored
  std::string app;   // read the parts of /scif/apps/APP/scif instead of /.singularity.d

  // Apptainer's default: the labels, when no other part is asked for.
  [[nodiscard]] bool wantsLabels() const {
    return labels || all ||
           !(deffile || runscript || startscript || test || environment || helpfile || listApps);
  }
};

struct ApptainerMetadata {
  ScopeAttributes image;
  std::string deffile;  // the SIF's Def.FILE object, else /.singularity.d/Singularity
  std::map<std::string, ScopeAttributes> apps;  // the apps the query shows

  // {"data":{"attributes":{...}},"type":"container"}, keys in Apptainer's order, empty
  // members left out.
  [[nodiscard]] nlohmann::ordered_json toJson() const;
};

// Reads what `query` asks for, without mounting. Throws ctr::Error for an unusable image
// and for a --app the image does not have.
ApptainerMetadata inspectLikeApptainer(const std::filesystem::path& path, const ApptainerQuery& query);

}  // namespace ctr::image
