// libcurl, libarchive and libcrypto, loaded with dlopen the first time an image is fetched
// (ctr/shared_library.hpp: libcurl alone pulls in a dozen shared libraries), so these
// function tables are the only way the pull code reaches them.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <archive.h>
#include <archive_entry.h>
#include <curl/curl.h>

namespace ctr::image::oci {

struct CurlApi {
  decltype(&curl_global_init) global_init;
  decltype(&curl_easy_init) easy_init;
  decltype(&curl_easy_setopt) easy_setopt;
  decltype(&curl_easy_perform) easy_perform;
  decltype(&curl_easy_getinfo) easy_getinfo;
  decltype(&curl_easy_cleanup) easy_cleanup;
  decltype(&curl_easy_reset) easy_reset;
  decltype(&curl_easy_strerror) easy_strerror;
  decltype(&curl_slist_append) slist_append;
  decltype(&curl_slist_free_all) slist_free_all;
};

struct ArchiveApi {
  decltype(&archive_read_new) read_new;
  decltype(&archive_read_support_filter_all) read_support_filter_all;
  decltype(&archive_read_support_format_tar) read_support_format_tar;
  decltype(&archive_read_open) read_open;
  decltype(&archive_read_open_memory) read_open_memory;
  decltype(&archive_read_next_header) read_next_header;
  decltype(&archive_read_data_block) read_data_block;
  decltype(&archive_read_free) read_free;
  decltype(&archive_filter_bytes) filter_bytes;
  decltype(&archive_error_string) error_string;
  decltype(&archive_entry_pathname) entry_pathname;
  decltype(&archive_entry_filetype) entry_filetype;
  decltype(&archive_entry_perm) entry_perm;
  decltype(&archive_entry_uid) entry_uid;
  decltype(&archive_entry_gid) entry_gid;
  decltype(&archive_entry_symlink) entry_symlink;
  decltype(&archive_entry_hardlink) entry_hardlink;
  decltype(&archive_entry_mtime) entry_mtime;
  decltype(&archive_entry_mtime_nsec) entry_mtime_nsec;
  decltype(&archive_entry_rdev) entry_rdev;
  decltype(&archive_entry_size) entry_size;
};

// Each throws ctr::Error naming the library and the Debian package to install when it
// cannot be loaded. Loaded once, kept for the life of the process.
const CurlApi& curlApi();
const ArchiveApi& archiveApi();

// libcrypto's message digests (ctr uses SHA-256).
struct CryptoApi {
  void* (*md_ctx_new)();
  void (*md_ctx_free)(void*);
  const void* (*sha256)();
  const void* (*sha384)();
  const void* (*sha512)();
  int (*digest_init_ex)(void*, const void*, void*);
  int (*digest_update)(void*, const void*, size_t);
  int (*digest_final_ex)(void*, unsigned char*, unsigned int*);
  // Base64 (the "auth" of Docker's and the containers tools' credential files).
  int (*encode_block)(unsigned char*, const unsigned char*, int);
  int (*decode_block)(unsigned char*, const unsigned char*, int);
  // Public keys and signature checks (signed SIF images, docs/design-signing.md).
  void* (*bio_new_mem_buf)(const void*, int);
  int (*bio_free)(void*);
  void* (*pem_read_bio_pubkey)(void*, void**, void*, void*);
  void (*pkey_free)(void*);
  int (*pkey_is_a)(const void*, const char*);
  int (*digest_verify_init)(void*, void**, const void*, void*, void*);
  int (*digest_verify)(void*, const unsigned char*, size_t, const unsigned char*, size_t);
  // A key's public parts (the SSH fingerprint that names a DSSE signer) and signing.
  int (*pkey_get_raw_public_key)(const void*, unsigned char*, size_t*);
  int (*pkey_get_bn_param)(const void*, const char*, void**);
  int (*pkey_get_octet_string_param)(const void*, const char*, unsigned char*, size_t, size_t*);
  int (*pkey_get_utf8_string_param)(const void*, const char*, char*, size_t, size_t*);
  int (*bn_num_bits)(const void*);
  int (*bn_bn2bin)(const void*, unsigned char*);
  void (*bn_free)(void*);
  void* (*pem_read_bio_privatekey)(void*, void**, void*, void*);
  int (*digest_sign_init)(void*, void**, const void*, void*, void*);
  int (*digest_sign)(void*, unsigned char*, size_t*, const unsigned char*, size_t);
};
const CryptoApi& cryptoApi();

// Standard base64 (with padding), through libcrypto; decode: nullopt for text that is not
// base64 (trailing whitespace allowed).
std::string base64Encode(const std::string& text);
std::optional<std::string> base64Decode(std::string_view text);

}  // namespace ctr::image::oci
