// The image holder's prepared root as one manifest (what it was built for, what it already
// mounts, what it added to the image), and the one decision of how a launch gets its root
// from it. Pure: the runtime reads the manifest and the file system, this decides.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ctr/host_facts.hpp"
#include "ctr/launch.hpp"

namespace ctr::launch {

// Raised whenever the manifest's meaning changes: a holder of another ctr version then has
// "no prepared root" for this one (its launches build their own roots).
inline constexpr int kPreparedRootManifestVersion = 1;

// One mount the holder made in the prepared root: a default, admin or host bind, or a host
// tmpfs (the injected libraries' directory, read-only once filled).
struct PreboundMount {
  MountKind kind = MountKind::Bind;  // Bind or Tmpfs
  std::string destination;
  std::string source;                // Bind only
  bool readOnly = false;             // Bind only
  bool recursive = true;             // Bind only
  unsigned tmpfsMode = 0;            // Tmpfs only: the planner's mode and size
  std::optional<std::uint64_t> tmpfsSizeBytes;

  bool operator==(const PreboundMount&) const = default;
};

// The deepest earlier mount of `mounts` (a bind, tmpfs or procfs) that holds mount i's
// destination (/proc for /proc/sys), if any: mount i's target exists only once that one is made.
[[nodiscard]] std::optional<std::size_t> holdingMount(const std::vector<Mount>& mounts, std::size_t i);

// The record of a plan mount the holder makes in the prepared root.
[[nodiscard]] PreboundMount preboundOf(const Mount& m);
// Whether plan mount `m` is exactly the prepared one: the same bind (source, read-only,
// recursive), or a tmpfs of the same mode and size at the same place.
[[nodiscard]] bool isPrebound(const PreboundMount& prebound, const Mount& m);

// Written by the holder last, atomically: its presence means the prepared root is complete.
struct PreparedRootManifest {
  host::HostUser user;                  // the identity files are built for this user
  std::vector<PreboundMount> prebound;  // in the order made: parents before what is inside them
  std::vector<std::string> created;     // targets added to the image, which a launch must mount over

  bool operator==(const PreparedRootManifest&) const = default;
};

[[nodiscard]] std::string toJson(const PreparedRootManifest& manifest);
// Throws ctr::Error (one line) for text that is not a manifest of kPreparedRootManifestVersion.
[[nodiscard]] PreparedRootManifest preparedRootManifestFromJson(std::string_view json);

// Whether a prepared bind is at or above the image's env scripts (/.singularity.d,
// /environment): their content could then change under the holder's copy of them.
[[nodiscard]] bool preboundReachesEnvScripts(const PreparedRootManifest& manifest);

enum class RootStrategyKind {
  JoinReady,    // setns into the holder's ready namespace: the prepared root is exactly the plan's
  UsePrepared,  // in the launch's copy: detach `detach`, mount the plan's `mount` ones on the prepared root
  OwnRoot,      // stage a root of the launch's own (bind, overlay or sandbox)
};

struct RootStrategy {
  RootStrategyKind kind = RootStrategyKind::OwnRoot;
  // UsePrepared: by plan mount index, whether this launch still mounts it (false: the
  // prepared root has it, its identity files are there, or its optional source is absent).
  std::vector<bool> mount;
  // UsePrepared: prepared destinations this plan does not have, parents before what is inside.
  std::vector<std::string> detach;
  // UsePrepared: by plan mount index, whether the mount's target lies in a tmpfs this launch
  // mounts anew (--contain's /dev: its device binds, /dev/shm, /dev/fd): the target is made
  // there once that tmpfs is mounted, as in a root of the launch's own.
  std::vector<bool> late;
  std::string reason;  // for the debug log: why this strategy
};

// Whether plan mount i's source is there: a Bind's host path exists (the runtime stats it;
// an absent required source throws). Asked only of the mounts the decision depends on.
using SourcePresent = std::function<bool(std::size_t)>;

// How a launch of `plan` gets its root, given the holder's manifest (nullptr: none, or
// unreadable) and whether the holder's ready namespace is there to join. With UsePrepared
// the runtime may still fall back to OwnRoot: a target to mount is missing in the prepared root.
[[nodiscard]] RootStrategy chooseRootStrategy(const LaunchPlan& plan, const PreparedRootManifest* manifest,
                                              const SourcePresent& sourcePresent, bool readyNamespace);

// What chooseRootStrategy reads of a plan (root mode, user, mounts, --mpi=bind's
// replacements), as one key. chooseRootStrategy is a pure function of that, the manifest
// (fixed for a holder's life) and the sources it asks about, so a JoinReady answer can be
// remembered in the prepared root's own directory and given again to a launch with the same
// key and the same answers about the same sources, without reading the manifest (14 KB of
// JSON with --nv's 60 library binds: 0.19 ms). Anything chooseRootStrategy comes to read of
// the plan must be added here.
[[nodiscard]] std::uint64_t rootStrategyKey(const LaunchPlan& plan);

// One remembered JoinReady decision: its plan's key, and each source asked about with its
// answer (plan mount index, present).
struct JoinMemo {
  std::uint64_t key = 0;
  std::vector<std::pair<std::size_t, bool>> answers;

  bool operator==(const JoinMemo&) const = default;
};

// The JoinReady decision of a memo for `key` (rootStrategyKey of a plan of `mounts` mounts)
// whose every asked source answers the same now, or nullopt: decide with chooseRootStrategy.
[[nodiscard]] std::optional<RootStrategy> rememberedJoin(const std::vector<JoinMemo>& memos, std::uint64_t key,
                                                         std::size_t mounts, const SourcePresent& sourcePresent);

// One line: "KEY16HEX INDEX:0|1 ...\n".
[[nodiscard]] std::string toLine(const JoinMemo& memo);
// The memos of `text` (lines of toLine); a line that is not one is skipped.
[[nodiscard]] std::vector<JoinMemo> parseJoinMemos(std::string_view text);

[[nodiscard]] std::string toString(RootStrategyKind kind);

}  // namespace ctr::launch
