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
  void* md = nullptr;
};

Digester::Digester() : context_(new Context{oci::cryptoApi()}) {
  context_->md = context_->crypto.md_ctx_new();
  if (!context_->md) throw Error("libcrypto: cannot allocate a digest context");
  if (context_->crypto.digest_init_ex(context_->md, context_->crypto.sha256(), nullptr) != 1) {
    context_->crypto.md_ctx_free(context_->md);
    throw Error("libcrypto: SHA-256 is not available");
  }
}

Digester::~Digester() { context_->crypto.md_ctx_free(context_->md); }

void Digester::update(const void* data, std::size_t size) {
  if (context_->crypto.digest_update(context_->md, data, size) != 1) throw Error("libcrypto: SHA-256 update failed");
}

std::string Digester::digest() {
  std::uint8_t md[32];
  unsigned int length = 0;
  if (context_->crypto.digest_final_ex(context_->md, md, &length) != 1 || length != sizeof md)
    throw Error("libcrypto: SHA-256 final failed");
  return "sha256:" + toHex(md);
}

FileDigest digestFile(int fd, const std::string& what, std::int64_t offset, std::int64_t length) {
  Digester digester;
  std::vector<char> buffer(std::size_t{1} << 20);
  FileDigest result;
  for (;;) {
    std::size_t want = buffer.size();
    if (length >= 0) want = static_cast<std::size_t>(std::min<std::int64_t>(length - static_cast<std::int64_t>(result.size), static_cast<std::int64_t>(want)));
    if (want == 0) break;
    const ssize_t got = ::pread(fd, buffer.data(), want, static_cast<off_t>(offset + static_cast<std::int64_t>(result.size)));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw sysError("read " + what);
    if (got == 0) {
      if (length >= 0) throw Error("read " + what + ": the file ends early");
      break;
    }
    digester.update(buffer.data(), static_cast<std::size_t>(got));
    result.size += static_cast<std::uint64_t>(got);
  }
  result.digest = digester.digest();
  return result;
}

}  // namespace ctr::image
