#include "ctr/digest.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <span>
#include <algorithm>
#include <vector>

#include "ctr/error.hpp"
#include "ctr/hash.hpp"
#include "oci_libs.hpp"

namespace ctr::image {

struct Digester::Context {
  const oci::CryptoApi& crypto;
  std::string name;
  void* md = nullptr;
};

Digester::Digester(std::string_view algorithm) : context_(new Context{oci::cryptoApi(), std::string(algorithm)}) {
  const auto& crypto = context_->crypto;
  const void* type = algorithm == "sha256"   ? crypto.sha256()
                     : algorithm == "sha384" ? crypto.sha384()
                     : algorithm == "sha512" ? crypto.sha512()
                                             : nullptr;
  if (!type) throw Error("digest algorithm " + std::string(algorithm) + " is not supported (sha256, sha384, sha512)");
  context_->md = crypto.md_ctx_new();
  if (!context_->md) throw Error("libcrypto: cannot allocate a digest context");
  if (crypto.digest_init_ex(context_->md, type, nullptr) != 1) {
    crypto.md_ctx_free(context_->md);
    throw Error("libcrypto: " + context_->name + " is not available");
  }
}

Digester::~Digester() { context_->crypto.md_ctx_free(context_->md); }

void Digester::update(const void* data, std::size_t size) {
  if (context_->crypto.digest_update(context_->md, data, size) != 1)
    throw Error("libcrypto: " + context_->name + " update failed");
}

std::string Digester::digest() {
  std::uint8_t md[64];
  unsigned int length = 0;
  if (context_->crypto.digest_final_ex(context_->md, md, &length) != 1 || length == 0 || length > sizeof md)
    throw Error("libcrypto: " + context_->name + " final failed");
  return context_->name + ":" + toHex(std::span<const std::uint8_t>(md, length));
}

std::uint64_t digestRange(Digester& digester, int fd, const std::string& what, std::int64_t offset, std::int64_t length) {
  std::vector<char> buffer(std::size_t{1} << 20);
  std::uint64_t done = 0;
  for (;;) {
    std::size_t want = buffer.size();
    if (length >= 0) want = static_cast<std::size_t>(std::min<std::int64_t>(length - static_cast<std::int64_t>(done), static_cast<std::int64_t>(want)));
    if (want == 0) break;
    const ssize_t got = ::pread(fd, buffer.data(), want, static_cast<off_t>(offset + static_cast<std::int64_t>(done)));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw sysError("read " + what);
    if (got == 0) {
      if (length >= 0) throw Error("read " + what + ": the file ends early");
      break;
    }
    digester.update(buffer.data(), static_cast<std::size_t>(got));
    done += static_cast<std::uint64_t>(got);
  }
  return done;
}

FileDigest digestFile(int fd, const std::string& what, std::int64_t offset, std::int64_t length) {
  Digester digester;
  FileDigest result;
  result.size = digestRange(digester, fd, what, offset, length);
  result.digest = digester.digest();
  return result;
}

bool isSha256Digest(std::string_view digest) {
  return digest.size() == 71 && digest.starts_with("sha256:") &&
         digest.find_first_not_of("0123456789abcdef", 7) == std::string_view::npos;
}

}  // namespace ctr::image
