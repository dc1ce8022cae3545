/* ctr-slurm-entrypoint: the program a task runs first under `srun --container-entrypoint`
 * (docs/design-slurm.md, section 3). It runs the image's runscript, ctr's name for an
 * image's entrypoint, with the task's command line as its arguments.
 *
 * Why a program of its own: SPANK's task_init may replace the elements of the argv that
 * slurmstepd then execs, but cannot make the array longer. So task_init puts this program
 * in argv[0] and the task's own argv[0] in CTR_ENTRYPOINT_ARG0, and this program execs
 *   /.singularity.d/runscript ARG0 argv[1] ...
 * It execs, never forks: the runscript, and the app it execs, keep the task's pid, its
 * signals and its exit status, as Slurm expects of a task.
 *
 * Static, libc only: task_init opened it on the node and it is exec'd as /proc/self/fd/N
 * inside the container, where the node's dynamic loader and libraries are not. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RUNSCRIPT "/.singularity.d/runscript"

int main(int argc, char **argv) {
  const char *arg0 = getenv("CTR_ENTRYPOINT_ARG0");
  if (!arg0) {
    fprintf(stderr, "ctr-slurm-entrypoint: CTR_ENTRYPOINT_ARG0 is not set (it is run by ctr's Slurm plugin for "
            "--container-entrypoint, not by hand)\n");
    return 127;
  }
  char **args = calloc((size_t)argc + 2, sizeof *args);
  char *command = strdup(arg0);
  if (!args || !command) {
    fprintf(stderr, "ctr: --container-entrypoint: out of memory\n");
    return 127;
  }
  args[0] = RUNSCRIPT;
  args[1] = command;
  for (int i = 1; i < argc; ++i) args[i + 1] = argv[i];
  args[argc + 1] = NULL;
  /* The app sees the environment it would have seen without the option. */
  unsetenv("CTR_ENTRYPOINT_ARG0");
  execv(RUNSCRIPT, args);
  if (errno == ENOENT && access(RUNSCRIPT, F_OK) != 0)
    fprintf(stderr, "ctr: --container-entrypoint: the image has no " RUNSCRIPT "\n");
  else
    fprintf(stderr, "ctr: --container-entrypoint: cannot run " RUNSCRIPT ": %s\n", strerror(errno));
  return 127;
}
