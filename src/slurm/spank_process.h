/* Processes and cgroups as the kernel shows them to the plugin: a process's start time, the
 * v1 cgroup hierarchies and a process's cgroups, and the capability drop of a task. Each
 * has a twin in ctr (processStartTime, parseCgroupMounts, parseProcCgroup,
 * dropAllCapabilities), and tests/unit/spank_twins_test.cpp runs both on the same input:
 * libc only, so that the test links this file too. */
#pragma once

#include <limits.h>
#include <stdio.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(hidden)

/* /proc/PID/stat's field 22 (clock ticks after boot), 0 when there is no such process: with
 * the pid, what tells a process from a later one that got its recycled pid. */
unsigned long long start_time(pid_t pid);

/* Every capability gone (bounding, ambient, effective, permitted, inheritable): 0, or -1. */
int drop_capabilities(void);

/* Whether the comma-separated LIST names CONTROLLER as a whole word ("cpu" is not in
 * "cpuset,cpuacct"). */
int has_option(const char *list, const char *controller);

/* The v1 hierarchies' mount points in `mountinfo` (field 5 where the file system is cgroup),
 * only the one of CONTROLLER (one of its super options) unless it is NULL, at most `max`. */
int cgroup_v1_mounts_in(FILE *mountinfo, char mounts[][PATH_MAX], int max, const char *controller);

/* cgroup_v1_mounts_in of this process's /proc/self/mountinfo. */
int cgroup_v1_mounts(char mounts[][PATH_MAX], int max, const char *controller);

/* The freezer hierarchy's cgroup in `cgroups` (a /proc/PID/cgroup) into `path`: 1, or 0. */
int freezer_cgroup_in(FILE *cgroups, char *path, size_t size);

/* Whether a cgroup in `cgroups` (a /proc/PID/cgroup, any hierarchy) is JOB_PATH or below it. */
int in_cgroup_in(FILE *cgroups, const char *job_path);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
