/* --container-image as pyxis and enroot read it (spank_image_name.h). */
#include "spank_image_name.h"

#include <stdio.h>
#include <string.h>

static int starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

static int ends_with(const char *s, const char *suffix) {
  const size_t n = strlen(s), m = strlen(suffix);
  return n > m && strcmp(s + n - m, suffix) == 0;
}

static const char *fitted(int n, char *out, size_t size, const char *image) {
  return n > 0 && (size_t)n < size ? out : image;
}

const char *container_image_argument(const char *image, const char *image_dir, char *out, size_t size) {
  static const char *const transports[] = {"docker://", "dockerd://", "podman://", "oras://", "docker-archive:",
                                           "oci-archive:", "oci:", "library://", "shub://", "http://", "https://",
                                           "instance://", NULL};
  for (const char *const *t = transports; *t; ++t)
    if (starts_with(image, *t)) return image;
  if (image[0] == '/' || image[0] == '.' || image[0] == '~') return image;
  static const char *const files[] = {".sif", ".sqsh", ".squashfs", ".simg", NULL};
  for (const char *const *f = files; *f; ++f)
    if (ends_with(image, *f)) return image;
  const char *at = strchr(image, '@'), *hash = strchr(image, '#');
  /* USER@ is enroot's: before the registry's '#', or, without one, where no digest follows
   * the '@' (an '@' after the '#', or before sha256:..., is a digest's). */
  const int user = at && (hash ? at < hash : !starts_with(at + 1, "sha256:") && !starts_with(at + 1, "sha512:"));
  const char *name = user ? at + 1 : image;
  if (hash && hash > name) return fitted(snprintf(out, size, "docker://%.*s/%s", (int)(hash - name), name, hash + 1), out, size, image);
  if (image_dir && image_dir[0] && !strpbrk(name, ":/#@"))
    return fitted(snprintf(out, size, "%s/%s", image_dir, name), out, size, image);
  return fitted(snprintf(out, size, "docker://%s", name), out, size, image);
}
