/* Reading ctr's join information (spank_join_info.h). */
#define _GNU_SOURCE
#include "spank_join_info.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void percent_decode(char *s) {
  char *out = s;
  for (; *s; ++s) {
    if (s[0] == '%' && s[1] && s[2]) {
      char hex[3] = {s[1], s[2], 0};
      *out++ = (char)strtol(hex, NULL, 16);
      s += 2;
    } else {
      *out++ = *s;
    }
  }
  *out = 0;
}

static int push(char ***list, int *n, const char *value) {
  char **grown = realloc(*list, sizeof(char *) * (size_t)(*n + 1));
  if (!grown) return -1;
  *list = grown;
  if (!(grown[*n] = strdup(value))) return -1;
  percent_decode(grown[*n]);
  ++*n;
  return 0;
}

int parse_join_info(char *text, struct join_info *join) {
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    char *eq = strchr(line, '=');
    if (!eq) return -1;
    *eq = 0;
    const char *key = line;
    char *value = eq + 1;
    if (strcmp(key, "name") == 0) {
      snprintf(join->name, sizeof join->name, "%s", value);
    } else if (strcmp(key, "image") == 0) {
      percent_decode(value); /* first: encoded, a path of PATH_MAX is up to three times as long */
      snprintf(join->image, sizeof join->image, "%s", value);
    } else if (strcmp(key, "keeper") == 0) {
      join->keeper = (pid_t)atol(value);
    } else if (strcmp(key, "keeper_start") == 0) {
      join->keeper_start = strtoull(value, NULL, 10);
    } else if (strcmp(key, "ns") == 0) {
      const char *colon = strchr(value, ':');
      if (!colon || join->nns == JOIN_MAX_NS || colon - value >= 8) return -1;
      memcpy(join->ns_type[join->nns], value, (size_t)(colon - value));
      join->ns_type[join->nns][colon - value] = 0;
      join->ns_inode[join->nns++] = strtoull(colon + 1, NULL, 10);
    } else if (strcmp(key, "seccomp") == 0) {
      if (!(join->seccomp = strdup(value))) return -1;
      percent_decode(join->seccomp);
    } else if (strcmp(key, "keep_capabilities") == 0) {
      join->keep_capabilities = strcmp(value, "1") == 0;
    } else if (strcmp(key, "set") == 0) {
      if (push(&join->set, &join->nset, value) != 0) return -1;
    } else if (strcmp(key, "unset") == 0) {
      if (push(&join->unset, &join->nunset, value) != 0) return -1;
    }
  }
  return join->keeper > 1 && join->nns >= 2 && strcmp(join->ns_type[0], "user") == 0 ? 0 : -1;
}

void reset_join_info(struct join_info *join) {
  free(join->seccomp);
  for (int i = 0; i < join->nset; ++i) free(join->set[i]);
  for (int i = 0; i < join->nunset; ++i) free(join->unset[i]);
  free(join->set);
  free(join->unset);
  memset(join, 0, sizeof *join);
}
