/* What --container-image names, as pyxis and enroot read it, in the form ctr takes. No Slurm
 * here: tests/unit/spank_twins_test.cpp checks it against ctr's own reference parser. */
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(hidden)

/* The ctr image argument for `image` (pyxis's --container-image) into `out`; returns `out`,
 * or `image` itself where it is taken as it is (or does not fit):
 *  - a transport ctr knows ("docker://", "oras://", "docker-archive:", "oci:", ...) as it is;
 *    enroot's "dockerd://" and "podman://" too (ctr says it cannot read a daemon's store);
 *  - a path: it starts with '/', '.' or '~', or ends in .sif, .sqsh, .squashfs, .simg;
 *  - enroot's [USER@][REGISTRY#]IMAGE[:TAG|@DIGEST]: docker://REGISTRY/IMAGE (the user name
 *    is enroot's for its credentials: ctr finds them by registry), IMAGE with any slashes, a
 *    missing tag being latest (ctr's default); "docker:26.1.0" is Docker Hub's docker image;
 *  - a bare NAME (no ':', '/' or '#') with `image_dir` set (plugstack's image_dir=): that
 *    directory's file NAME, the site's images. */
const char *container_image_argument(const char *image, const char *image_dir, char *out, size_t size);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
