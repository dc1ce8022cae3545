// What the host scans (src/host) share: paths under a node root (a fixture tree in tests),
// the identity a cached scan is valid for, and writing a scan cache atomically.
#pragma once

#include <string>

namespace ctr::host {

// `path` on the node whose files are under `root` ("/" on a real node).
[[nodiscard]] std::string underRoot(const std::string& root, const std::string& path);

// A file's or directory's identity (device, inode, size, mtime), or "PATH:missing": a
// cached scan made from it is valid while this is unchanged.
[[nodiscard]] std::string fileIdentity(const std::string& path);

// Writes `content` to `path` through a temporary file and rename, so that a reader sees
// the old file, the new one, or none. Throws ctr::Error naming `what` ("the driver scan
// cache") and the file.
void writeScanCache(const std::string& path, const std::string& content, const std::string& what);

}  // namespace ctr::host
