// The site image store (ctr.conf 'image store dir'): registry images packed once into SIFs
// and kept on a file system every node reads (NFS, Lustre, GPFS), so that a job's nodes,
// and the next jobs, run the image without asking the registry for its layers again.
//
// Layout (docs/admin-guide.md, "The site image store"):
//   ROOT/                          the admin's; its owner is the store's writer of record
//   ROOT/UID/                      the entries user UID wrote: owned by UID, writable by
//                                  nobody else (0755 for root and ROOT's owner, else 0700)
//   ROOT/UID/sha256-HEX.sif        the packed image, HEX its manifest's digest
//   ROOT/UID/sha256-HEX.json       {"digest", "references", "sif_digest", "sif_bytes",
//                                  "sif_identity", "created"}: written last, so it is
//                                  the entry
//   ROOT/UID/sha256-HEX.filling    a launch is filling it: "HOST PID", refreshed every few s
//   ROOT/UID/.tmp-...              what a writer has not renamed into place yet
//
// Writes are a new file, fsync, rename: a writer killed at any point leaves at most a
// .tmp- file or a SIF without a record, neither of which a reader sees. Reads take no lock.
// A user runs the entries of the writers it trusts: its own, root's and ROOT's owner's (the
// admin fills the store for everyone as that account); never another user's, whose files
// that user could change at any time. A SIF copied to the node is checked against its
// record's sha256 on the way; one run in place is checked to be the file its writer wrote
// (its identity: no read, so a node's first launch costs a stat), and `ctr store verify`
// reads every entry against its sha256 (a scrub for what storage itself may corrupt).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ctr::config {
struct PullPolicy;
}

namespace ctr::image::store {

// The store a user's launches use: ctr.conf's 'image store dir', else $CTR_IMAGE_STORE (an
// absolute path: the Slurm plugin's job store, job_store=DIR, or one of the user's own);
// empty: none.
std::filesystem::path rootOf(const config::PullPolicy& pull);

struct Entry {
  std::string digest;                   // "sha256:..." of the image manifest
  std::vector<std::string> references;  // the docker:// references it was filled for
  std::filesystem::path sif;
  std::string sifDigest;  // "sha256:..." of the SIF file
  std::uint64_t bytes = 0;
  std::string identity;  // the SIF as written: inode, size, mtime, ctime
  uid_t writer = 0;
  std::int64_t created = 0;
  std::int64_t lastUsed = 0;  // the record's mtime, or the SIF's atime when later
};

// The entry of `digest` that `uid` may run, its own first; nullopt when there is none or it
// is incomplete (no record, a SIF of another size than recorded). Throws ctr::Error when
// ROOT is not a store anyone can trust (missing, a symlink, writable by others without the
// sticky bit).
std::optional<Entry> find(const std::filesystem::path& root, const std::string& digest, uid_t uid);
// The most recent entry `uid` may run that was filled for `reference` (an offline launch).
std::optional<Entry> findByReference(const std::filesystem::path& root, const std::string& reference, uid_t uid);

// Copies the entry's SIF to `dest` (a new file beside it, renamed into place once complete),
// checking its sha256 on the way; throws ctr::Error ("... is corrupt") when it differs, and
// leaves nothing at `dest` then.
void copyVerified(const Entry& entry, const std::filesystem::path& dest);
// Whether the entry's SIF is still the file its writer wrote (its inode, size, mtime and
// ctime as recorded: any write, truncation, replacement or chmod since changes one): what
// a launch that runs it in place checks, without reading it. One warning when not.
[[nodiscard]] bool unchangedInPlace(const Entry& entry);
// Whether the entry's SIF has its recorded sha256 (reads it all: `ctr store verify`). One
// warning when not.
[[nodiscard]] bool verify(const Entry& entry);
// Drops a corrupt entry where `uid` may (its own; root: any), the record first, so that no
// reader sees it. False where it may not.
bool discard(const Entry& entry, uid_t uid);

// The right to fill `digest` in ROOT/UID, held while the object lives: the .filling file,
// refreshed by a thread so that other nodes see the filler alive, removed at the end.
class Fill {
 public:
  Fill(std::filesystem::path dir, std::string digest);
  ~Fill();
  Fill(const Fill&) = delete;
  Fill& operator=(const Fill&) = delete;
  // Publishes `localSif` (the image just packed on this node) as the entry: a copy, fsync,
  // rename, then the record likewise. Returns false, with one warning naming the store and
  // the reason, where the store cannot take it (full, read-only, quota): the launch goes on
  // from its node-local copy and nothing half-written stays.
  bool publish(const std::filesystem::path& localSif, const std::string& reference);

 private:
  struct Heartbeat;
  std::filesystem::path dir_;
  std::string digest_;
  std::unique_ptr<Heartbeat> heartbeat_;
};

// Either the right to fill `digest` (`fill`), or the entry another launch (another node)
// filled while this one waited (`entry`), or neither: ROOT/UID cannot be written here
// (a store only the admin fills), or the filler stopped without an entry (then fill it).
// Waits at most `wait`; a filler whose .filling file does not change for a minute is
// dead and its claim is taken over. Throws ctr::Error, naming the filler, after `wait`.
struct Claim {
  std::unique_ptr<Fill> fill;
  std::optional<Entry> entry;
};
Claim claim(const std::filesystem::path& root, const std::string& digest, uid_t uid, std::chrono::seconds wait);

// `ctr store list|size|clean|verify`: every entry under ROOT readable by the caller (each writer's
// directory), newest use first.
std::vector<Entry> list(const std::filesystem::path& root);

struct CleanOptions {
  bool all = false;                               // every entry, and every leftover whatever its age
  std::optional<std::chrono::seconds> unusedFor;  // only entries unused this long
  std::optional<std::uint64_t> maxBytes;          // least recently used go until the rest fit
  std::string reference;                          // only entries filled for this reference
  bool dryRun = false;
};
struct Cleaned {
  std::vector<Entry> entries;  // removed (or, dry run, to be removed)
  std::size_t leftovers = 0;   // .tmp- files and dead .filling files of killed writers
  std::uint64_t bytes = 0;
};
// Removes what `options` selects among the entries the caller may remove (root: all), and
// writers' leftovers older than an hour (with `all`: every leftover, and the caller's own
// directory once empty: the Slurm plugin's end of a job store).
Cleaned clean(const std::filesystem::path& root, const CleanOptions& options);

}  // namespace ctr::image::store
