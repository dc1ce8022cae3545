// The image cache: what `exec|run|shell|inspect|instance start docker://REF` (and the Slurm
// plugin's --container-image=docker://REF) run. Each image is pulled and packed into a SIF
// once per cache directory (oci::cacheRoot: ctr.conf's 'image cache dir' makes it
// node-local), named by the digest of its manifest for this platform, so a moved tag is a
// new image and an image is never half there: one process pulls under the cache's lock,
// the others wait and then find it. The least recently used images go when the cache passes
// 'image cache max size'. The layers pulled on the way stay in the same cache (blobs/).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ctr/oci.hpp"

namespace ctr::image::cache {

// Whether an IMAGE argument names a registry image: "docker://...".
[[nodiscard]] bool isRegistryReference(std::string_view image);

// One cached image.
struct Entry {
  std::string digest;                   // "sha256:..." of the manifest
  std::vector<std::string> references;  // the docker:// references it was asked by
  std::filesystem::path sif;
  std::uint64_t bytes = 0;
  std::int64_t lastUsed = 0;  // seconds since the epoch
};

// What a launch runs: the cached SIF of `reference` ("docker://..."), pulled first when the
// cache lacks it. With a site store ('image store dir', ctr/image_store.hpp) a miss in the
// node's cache is looked up there first, run in place or copied ('image store copy'); a
// miss there too is pulled by one launch, which fills the store, while the launches of the
// user's other nodes wait for that entry instead of pulling. The registry is asked for the manifest's digest every time (a tag may have
// moved); where it cannot be reached, the image last cached for the same reference is used,
// with a warning. Throws ctr::Error, one line naming the reference.
struct Acquired {
  std::filesystem::path sif;
  std::string reference;
  std::string digest;
  bool pulled = false;   // this call pulled it
  bool offline = false;  // the registry could not be reached: an earlier copy
  // Where `sif` came from, for --explain: "the image cache", "the site image store", "the
  // site image store, copied to the image cache".
  std::string via = "the image cache";
};
Acquired acquire(const std::string& reference, const oci::PullOptions& options);

// The cached images, most recently used first, and the layers.
struct Blob {
  std::string name;  // the file's name: the layer's sha256 in hex
  std::uint64_t bytes = 0;
  std::int64_t modified = 0;  // seconds since the epoch
};
struct Listing {
  std::filesystem::path root;
  std::vector<Entry> images;
  std::vector<Blob> blobList;
  std::size_t blobs = 0;
  std::uint64_t blobBytes = 0;
};
Listing list(const oci::PullOptions& options);

// Removes the cached images and layers (unused for at least `unusedFor`, when given), under
// the cache's lock; with `dryRun` only counts them. A container still running from a removed
// image keeps it open until it ends.
// `kinds` says which: the images, the layers, or both.
struct Cleaned {
  std::size_t images = 0, blobs = 0;
  std::uint64_t bytes = 0;
};
struct Kinds {
  bool images = true;
  bool blobs = true;
};
Cleaned clean(const oci::PullOptions& options, std::optional<std::chrono::seconds> unusedFor, bool dryRun,
              Kinds kinds = {});

}  // namespace ctr::image::cache
