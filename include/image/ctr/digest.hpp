// SHA-256, streamed, for the OCI digests of pulls, imports and the SIF writer's OCI
// descriptors. libcrypto's (SHA-NI where the CPU has it, and what image signing will use),
// loaded with dlopen the first time a digest is taken: ctr itself links only libc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace ctr::image {

class Digester {
 public:
  // "sha256" (OCI's), "sha384" or "sha512" (signed SIF images may name them). Throws
  // ctr::Error naming libcrypto and its Debian package when it cannot be loaded, or naming
  // another algorithm.
  explicit Digester(std::string_view algorithm = "sha256");
  ~Digester();
  Digester(const Digester&) = delete;
  Digester& operator=(const Digester&) = delete;
  void update(const void* data, std::size_t size);
  // "sha256:<64 lowercase hex digits>" (the algorithm's name and hex digits); the object
  // must not be updated afterwards.
  std::string digest();

 private:
  struct Context;
  std::unique_ptr<Context> context_;
};

// "sha256:..." of the file open at `fd` (read with pread: the fd's offset is left alone),
// whole, or `length` bytes from `offset` (a SIF object), and how many bytes that was.
// Throws ctr::Error naming `what` (also when the file ends before `length` bytes).
struct FileDigest {
  std::string digest;
  std::uint64_t size = 0;
};
FileDigest digestFile(int fd, const std::string& what, std::int64_t offset = 0, std::int64_t length = -1);
// The same bytes fed to `digester` (with length -1: to the end); how many there were.
std::uint64_t digestRange(Digester& digester, int fd, const std::string& what, std::int64_t offset, std::int64_t length);

// Whether `digest` is "sha256:" and 64 lowercase hex digits: what every registry and tool
// writes, and all ctr accepts (oci::checkDigestSyntax, the lazy spec and chunk tables).
bool isSha256Digest(std::string_view digest);

}  // namespace ctr::image
