// Instances: the join record that `instance start` writes and every later join reads, and
// the planning of a launch into a running instance (docs/design-slurm.md, section 2).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ctr/launch.hpp"

namespace ctr::launch {

inline constexpr std::string_view kInstanceScheme = "instance://";

// What `instance start` records once the instance runs (InstancePlan::record, mode 0600).
struct InstanceRecord {
  std::string name;
  std::string image;               // the image's path
  std::string started;             // UTC, ISO 8601
  pid_t keeper = 0;                // the instance's PID 1, as the host sees it
  std::uint64_t keeperStart = 0;   // its start time (/proc/PID/stat field 22)
  pid_t standIn = 0;               // outside the PID namespace: holds the image's registration
  std::vector<JoinNamespace> namespaces;  // setns order
  std::string home;                // the container's home directory
  std::string workdir;             // the keeper's working directory in the container
  std::vector<std::string> environment;   // the keeper's evaluated environment ("K=V")
  // The environment `instance start` was given ("K=V"): what the container's changes are
  // measured against for a later join (empty in records of earlier versions).
  std::vector<std::string> startEnvironment;
  std::string logOut, logErr;
  std::string seccomp;             // the compiled seccomp filter (raw sock_filter[]), if the hand-over has one
  // Started with --fakeroot: a launch into it is root there with root's capabilities, as
  // its keeper (its user namespace maps the user to root).
  bool fakeroot = false;
  // Started with limits (--memory, --cpus, ...): its cgroup's directories (controller, "" on
  // v2, -> directory), which its keeper and everything in it, later launches into it
  // included, are in; removed when it is stopped.
  std::map<std::string, std::string> cgroups;
};

[[nodiscard]] std::string instanceRecordToJson(const InstanceRecord& record);
// Throws ctr::Error naming `source` when the text is not a record.
[[nodiscard]] InstanceRecord instanceRecordFromJson(std::string_view json, const std::string& source);

// How a process outside ctr joins the instance (the Slurm plugin's tasks), as
// `instance start --join-info` prints it: one "key=value" per line, values percent-encoded
// ('%', control bytes): name, image, keeper, keeper_start, ns=TYPE:INODE (setns order), seccomp
// (the compiled filter's path, if any), no_new_privs=1, keep_capabilities=1 (a --fakeroot
// instance: a joiner keeps root's capabilities in its user namespace), then set=NAME=VALUE and unset=NAME
// for each variable the container's environment changes against `callerEnvironment`
// (the joining process's, "K=V"): the changes the container made to the environment it was
// started with (record.startEnvironment), applied to the caller's. A variable the container
// left as it found it keeps the caller's value (the SLURM_STEP_ID of a later step that
// joins a named container); one the caller has and the container never saw stays. Against
// record.startEnvironment itself it lists every change, which applied to any joiner's
// environment gives the same result: what the instance's join file holds.
[[nodiscard]] std::string instanceJoinInfo(const InstanceRecord& record, const std::vector<std::string>& callerEnvironment);

// An instance name: letters, digits, '_', '-', '.', not starting with '.', at most 64.
[[nodiscard]] bool isValidInstanceName(std::string_view name);
// The NAME of "instance://NAME", or nullopt for any other image reference. Throws
// ctr::Error for a bad name.
[[nodiscard]] std::optional<std::string> instanceReference(std::string_view image);

// Where the instance NAME's files go in the state directory (empty: no shared state
// directory, and no instance can be started). Throws ctr::Error for a bad name.
[[nodiscard]] InstancePlan planInstanceFiles(const std::string& name, const std::string& stateDir);

// A launch into the running instance `record` (exec|run|shell instance://NAME): the
// command, environment and working directory of the options, the instance's namespaces
// and root. Options that change what the instance already set (mounts, namespaces,
// devices, limits) are refused, named. Pure.
[[nodiscard]] LaunchPlan planJoin(const LaunchOptions& options, const config::Policy& policy,
                                  const InstanceRecord& record, const image::ImageSource& image,
                                  const host::HostFacts& host);

}  // namespace ctr::launch
