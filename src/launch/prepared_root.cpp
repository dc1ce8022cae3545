// How a launch gets its root from the holder's prepared root (ctr/prepared_root.hpp): the
// decision only; the runtime reads the manifest, stats the sources and mounts.
#include "ctr/prepared_root.hpp"

#include <algorithm>

#include "ctr/hash.hpp"
#include "ctr/pathutil.hpp"

namespace ctr::launch {

namespace {

// Whether bind `inner` (under bind `outer`) shows the very host path that `outer` already
// shows there, no more writable: a read-only inner bind under a writable outer one is not.
bool showsSameHostPath(const Mount& outer, const Mount& inner) {
  if (outer.kind != MountKind::Bind || inner.kind != MountKind::Bind || outer.source.empty()) return false;
  if (inner.readOnly && !outer.readOnly) return false;
  const std::string below = inner.destination.substr(outer.destination.size());
  return normalizePath(outer.source + below) == normalizePath(inner.source);
}

// The prepared root's mounts against this plan: which plan mounts they already are (by
// index), and which prepared mounts the plan does not have at all (to detach in a launch's copy).
struct PreboundFit {
  std::vector<bool> satisfied;
  std::vector<std::string> unused;  // destinations, parents before what is inside them
};

PreboundFit fitPrebound(const LaunchPlan& plan, const std::vector<PreboundMount>& prebound) {
  PreboundFit fit{std::vector<bool>(plan.mounts.size(), false), {}};
  for (const auto& p : prebound) {
    // Gone with a detached parent (a host tmpfs and the binds in it).
    if (std::any_of(fit.unused.begin(), fit.unused.end(),
                    [&](const std::string& d) { return isAtOrUnder(p.destination, d); }))
      continue;
    bool present = false;
    for (std::size_t i = 0; i < plan.mounts.size(); ++i) {
      if (plan.mounts[i].destination != p.destination) continue;
      present = true;  // another mount there: made over the prepared one
      if (isPrebound(p, plan.mounts[i])) fit.satisfied[i] = true;
    }
    if (!present) fit.unused.push_back(p.destination);
  }
  // A prepared bind inside a mount this launch makes anew (--pid's procfs over /proc) would be
  // hidden by it: the launch makes it again.
  for (std::size_t i = 0; i < plan.mounts.size(); ++i)
    if (const auto holder = holdingMount(plan.mounts, i); fit.satisfied[i] && holder && !fit.satisfied[*holder])
      fit.satisfied[i] = false;
  return fit;
}

// Why the identity files of the prepared root are not this plan's, or "".
std::string otherIdentity(const host::HostUser& prepared, const host::HostUser& user) {
  if (prepared == user) return {};
  if (prepared.uid != user.uid || prepared.name != user.name)
    return "the prepared root is for user " + prepared.name + " (" + std::to_string(prepared.uid) +
           "), this launch runs as " + user.name + " (" + std::to_string(user.uid) + ")";
  if (prepared.home != user.home)
    return "the prepared root is for home " + prepared.home + ", this launch's is " + user.home;
  return "the prepared root's identity files are for another record of " + user.name +
         " (groups, shell or gecos differ)";
}

// A created target the plan does not mount over (--no-home: no home directory), or "": the
// container would otherwise show an empty directory the image does not have.
std::string uncoveredTarget(const LaunchPlan& plan, const std::vector<std::string>& created,
                            const SourcePresent& sourcePresent) {
  for (const auto& target : created) {
    bool mounted = false;
    for (std::size_t i = 0; i < plan.mounts.size() && !mounted; ++i) {
      const Mount& m = plan.mounts[i];
      mounted = m.destination == target && m.kind != MountKind::File && m.kind != MountKind::Identity &&
                (m.kind != MountKind::Bind || sourcePresent(i));
    }
    if (!mounted) return target;
  }
  return {};
}

// Why a launch that can use the prepared root does not join the ready namespace.
std::string whyNotJoin(const LaunchPlan& plan, const PreboundFit& fit, const std::vector<bool>& mount,
                       bool readyNamespace) {
  std::string why;
  auto add = [&](const std::string& text) { why += (why.empty() ? "" : "; ") + text; };
  if (!fit.unused.empty()) {
    std::string list;
    for (const auto& d : fit.unused) list += (list.empty() ? "" : ", ") + d;
    add("the prepared root has " + list + ", which this launch does not mount (detached)");
  }
  if (plan.mpi && !plan.mpi->replace.empty()) add("--mpi=bind replaces the image's MPI libraries");
  const auto count = std::count(mount.begin(), mount.end(), true);
  if (count > 0) {
    const auto first = std::find(mount.begin(), mount.end(), true) - mount.begin();
    add("this launch makes " + std::to_string(count) + " mount(s) more, first " + plan.mounts[first].destination);
  }
  if (!readyNamespace) add("the holder has no ready namespace");
  return why;
}

}  // namespace

std::optional<std::size_t> holdingMount(const std::vector<Mount>& mounts, std::size_t i) {
  std::optional<std::size_t> holder;
  for (std::size_t k = 0; k < i; ++k) {
    const Mount& m = mounts[k];
    if (m.kind != MountKind::Bind && m.kind != MountKind::Tmpfs && m.kind != MountKind::Proc &&
        m.kind != MountKind::Sysfs)
      continue;
    if (m.destination != mounts[i].destination && isAtOrUnder(mounts[i].destination, m.destination) &&
        (!holder || m.destination.size() > mounts[*holder].destination.size()))
      holder = k;
  }
  return holder;
}

PreboundMount preboundOf(const Mount& m) {
  if (m.kind == MountKind::Tmpfs) return {MountKind::Tmpfs, m.destination, {}, false, true, m.tmpfsMode, m.tmpfsSizeBytes};
  return {MountKind::Bind, m.destination, m.source, m.readOnly, m.recursive, 0, {}};
}

bool isPrebound(const PreboundMount& prebound, const Mount& m) {
  if (m.destination != prebound.destination || m.kind != prebound.kind) return false;
  if (m.kind == MountKind::Tmpfs) return m.tmpfsMode == prebound.tmpfsMode && m.tmpfsSizeBytes == prebound.tmpfsSizeBytes;
  return m.kind == MountKind::Bind && m.source == prebound.source && m.readOnly == prebound.readOnly &&
         m.recursive == prebound.recursive;
}

bool preboundReachesEnvScripts(const PreparedRootManifest& manifest) {
  return std::any_of(manifest.prebound.begin(), manifest.prebound.end(), [](const PreboundMount& p) {
    const std::string& d = p.destination;
    return d == "/environment" || d == "/" || d == "/.singularity.d" || d.starts_with("/.singularity.d/");
  });
}

RootStrategy chooseRootStrategy(const LaunchPlan& plan, const PreparedRootManifest* manifest,
                                const SourcePresent& sourcePresent, bool readyNamespace) {
  RootStrategy strategy;
  auto ownRoot = [&](std::string reason) {
    strategy.reason = std::move(reason);
    return strategy;
  };
  if (plan.rootMode != RootMode::Bind) return ownRoot("the root is " + toString(plan.rootMode));
  if (!manifest) return ownRoot("no prepared root");
  if (auto why = otherIdentity(manifest->user, plan.user); !why.empty()) return ownRoot(why);
  const PreboundFit fit = fitPrebound(plan, manifest->prebound);
  if (auto target = uncoveredTarget(plan, manifest->created, sourcePresent); !target.empty())
    return ownRoot("the prepared root has " + target + ", which this launch does not mount");

  // What this launch still mounts: not the identity files (same user, same image), not what
  // the prepared root has, not a bind whose optional source is absent.
  std::vector<bool> mount(plan.mounts.size(), false);
  for (std::size_t i = 0; i < plan.mounts.size(); ++i) {
    const Mount& m = plan.mounts[i];
    mount[i] = m.kind != MountKind::Identity && !fit.satisfied[i] && (m.kind != MountKind::Bind || sourcePresent(i));
  }
  const bool exact = fit.unused.empty() && (!plan.mpi || plan.mpi->replace.empty()) &&
                     std::none_of(mount.begin(), mount.end(), [](bool b) { return b; });
  if (exact && readyNamespace) {
    strategy.kind = RootStrategyKind::JoinReady;
    strategy.reason = "the prepared root is exactly this launch's root";
    return strategy;
  }
  std::vector<bool> late(plan.mounts.size(), false);
  for (std::size_t i = 0; i < plan.mounts.size(); ++i) {
    if (!mount[i]) continue;
    // Its target in the prepared root would be the one under the mount this launch makes over it.
    const auto holder = holdingMount(plan.mounts, i);
    if (!holder || fit.satisfied[*holder]) continue;
    // The same host file, as the holder's bind already shows it (the default /etc/localtime
    // under --bind /etc:/etc): nothing to add.
    if (showsSameHostPath(plan.mounts[*holder], plan.mounts[i])) {
      mount[i] = false;
      continue;
    }
    // In a tmpfs this launch mounts anew (--contain's /dev): its target is made there, after it.
    if (plan.mounts[*holder].kind == MountKind::Tmpfs && mount[*holder]) {
      late[i] = true;
      continue;
    }
    return ownRoot("mount target " + plan.mounts[i].destination + " is inside " + plan.mounts[*holder].destination +
                   ", which this launch mounts");
  }
  strategy.kind = RootStrategyKind::UsePrepared;
  strategy.reason = whyNotJoin(plan, fit, mount, readyNamespace);
  strategy.mount = std::move(mount);
  strategy.late = std::move(late);
  strategy.detach = fit.unused;
  return strategy;
}

std::uint64_t rootStrategyKey(const LaunchPlan& plan) {
  std::uint64_t h = fnv1a64("ctr root strategy 1");
  auto add = [&h](std::string_view text) {
    h = fnv1a64(text, h);
    h = fnv1a64(std::string_view("\0", 1), h);  // a separator no field holds
  };
  auto addNumber = [&add](std::uint64_t n) { add(std::to_string(n)); };
  addNumber(static_cast<std::uint64_t>(plan.rootMode));
  const host::HostUser& u = plan.user;
  for (std::uint64_t n : {std::uint64_t{u.uid}, std::uint64_t{u.gid}, std::uint64_t{u.primaryGroup.gid}}) addNumber(n);
  for (const std::string* text : {&u.name, &u.gecos, &u.home, &u.shell, &u.primaryGroup.name}) add(*text);
  addNumber(u.groups.size());
  for (const auto& g : u.groups) {
    addNumber(g.gid);
    add(g.name);
  }
  addNumber(plan.mpi && !plan.mpi->replace.empty());
  addNumber(plan.mounts.size());
  for (const Mount& m : plan.mounts) {
    addNumber(static_cast<std::uint64_t>(m.kind));
    add(m.source);
    add(m.destination);
    add(m.content);
    addNumber(static_cast<std::uint64_t>(m.identity));
    addNumber((m.readOnly ? 1u : 0u) | (m.recursive ? 2u : 0u) | (m.required ? 4u : 0u));
    addNumber(m.tmpfsMode);
    addNumber(m.tmpfsSizeBytes ? *m.tmpfsSizeBytes + 1 : 0);
  }
  return h;
}

std::optional<RootStrategy> rememberedJoin(const std::vector<JoinMemo>& memos, std::uint64_t key, std::size_t mounts,
                                           const SourcePresent& sourcePresent) {
  for (const auto& memo : memos) {
    if (memo.key != key) continue;
    if (std::all_of(memo.answers.begin(), memo.answers.end(),
                    [&](const auto& a) { return a.first < mounts && sourcePresent(a.first) == a.second; })) {
      RootStrategy strategy;
      strategy.kind = RootStrategyKind::JoinReady;
      strategy.reason = "the prepared root is exactly this launch's root (remembered for this plan)";
      return strategy;
    }
  }
  return std::nullopt;
}

std::string toString(RootStrategyKind kind) {
  switch (kind) {
    case RootStrategyKind::JoinReady: return "join the holder's ready namespace";
    case RootStrategyKind::UsePrepared: return "a copy of the prepared root";
    case RootStrategyKind::OwnRoot: return "own root";
  }
  return "?";
}

}  // namespace ctr::launch
