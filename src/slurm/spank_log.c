/* The plugin's log for what its Slurm-free parts (spank_state_dir.c) report: Slurm's
 * error log. tests/unit/spank_twins_test.cpp gives its own. */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "spank_state_dir.h"

void spank_error(const char *format, ...) {
  char line[2 * PATH_MAX];
  va_list args;
  va_start(args, format);
  vsnprintf(line, sizeof line, format, args);
  va_end(args);
  slurm_error("%s", line);
}
