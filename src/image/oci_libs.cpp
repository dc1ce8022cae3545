#include "oci_libs.hpp"

#include <algorithm>
#include <cctype>
#include <mutex>
#include <string>

#include "ctr/error.hpp"
#include "ctr/shared_library.hpp"

namespace ctr::image::oci {

namespace {

template <typename T>
void bind(void* handle, const char* soname, const char* symbol, T& slot) {
  bindSymbol(handle, soname, symbol, slot);
}

}  // namespace

const CurlApi& curlApi() {
  static CurlApi api;
  static std::once_flag once;
  std::call_once(once, [] {
    const char* so = "libcurl.so.4";
    void* h = openLibrary(so, "libcurl4");
    bind(h, so, "curl_global_init", api.global_init);
    bind(h, so, "curl_easy_init", api.easy_init);
    bind(h, so, "curl_easy_setopt", api.easy_setopt);
    bind(h, so, "curl_easy_perform", api.easy_perform);
    bind(h, so, "curl_easy_getinfo", api.easy_getinfo);
    bind(h, so, "curl_easy_cleanup", api.easy_cleanup);
    bind(h, so, "curl_easy_reset", api.easy_reset);
    bind(h, so, "curl_easy_strerror", api.easy_strerror);
    bind(h, so, "curl_slist_append", api.slist_append);
    bind(h, so, "curl_slist_free_all", api.slist_free_all);
    if (api.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) throw Error("curl_global_init failed");
  });
  return api;
}

const ArchiveApi& archiveApi() {
  static ArchiveApi api;
  static std::once_flag once;
  std::call_once(once, [] {
    const char* so = "libarchive.so.13";
    void* h = openLibrary(so, "libarchive13");
    bind(h, so, "archive_read_new", api.read_new);
    bind(h, so, "archive_read_support_filter_all", api.read_support_filter_all);
    bind(h, so, "archive_read_support_format_tar", api.read_support_format_tar);
    bind(h, so, "archive_read_open", api.read_open);
    bind(h, so, "archive_read_open_memory", api.read_open_memory);
    bind(h, so, "archive_read_next_header", api.read_next_header);
    bind(h, so, "archive_read_data_block", api.read_data_block);
    bind(h, so, "archive_read_free", api.read_free);
    bind(h, so, "archive_filter_bytes", api.filter_bytes);
    bind(h, so, "archive_error_string", api.error_string);
    bind(h, so, "archive_entry_pathname", api.entry_pathname);
    bind(h, so, "archive_entry_filetype", api.entry_filetype);
    bind(h, so, "archive_entry_perm", api.entry_perm);
    bind(h, so, "archive_entry_uid", api.entry_uid);
    bind(h, so, "archive_entry_gid", api.entry_gid);
    bind(h, so, "archive_entry_symlink", api.entry_symlink);
    bind(h, so, "archive_entry_hardlink", api.entry_hardlink);
    bind(h, so, "archive_entry_mtime", api.entry_mtime);
    bind(h, so, "archive_entry_mtime_nsec", api.entry_mtime_nsec);
    bind(h, so, "archive_entry_rdev", api.entry_rdev);
    bind(h, so, "archive_entry_size", api.entry_size);
  });
  return api;
}

const CryptoApi& cryptoApi() {
  static CryptoApi api;
  static std::once_flag once;
  std::call_once(once, [] {
    const char* so = "libcrypto.so.3";
    void* h = openLibrary(so, "libssl3");
    bind(h, so, "EVP_MD_CTX_new", api.md_ctx_new);
    bind(h, so, "EVP_MD_CTX_free", api.md_ctx_free);
    bind(h, so, "EVP_sha256", api.sha256);
    bind(h, so, "EVP_sha384", api.sha384);
    bind(h, so, "EVP_sha512", api.sha512);
    bind(h, so, "EVP_DigestInit_ex", api.digest_init_ex);
    bind(h, so, "EVP_DigestUpdate", api.digest_update);
    bind(h, so, "EVP_DigestFinal_ex", api.digest_final_ex);
    bind(h, so, "EVP_EncodeBlock", api.encode_block);
    bind(h, so, "EVP_DecodeBlock", api.decode_block);
    bind(h, so, "BIO_new_mem_buf", api.bio_new_mem_buf);
    bind(h, so, "BIO_free", api.bio_free);
    bind(h, so, "PEM_read_bio_PUBKEY", api.pem_read_bio_pubkey);
    bind(h, so, "EVP_PKEY_free", api.pkey_free);
    bind(h, so, "EVP_PKEY_is_a", api.pkey_is_a);
    bind(h, so, "EVP_DigestVerifyInit", api.digest_verify_init);
    bind(h, so, "EVP_DigestVerify", api.digest_verify);
    bind(h, so, "EVP_PKEY_get_raw_public_key", api.pkey_get_raw_public_key);
    bind(h, so, "EVP_PKEY_get_bn_param", api.pkey_get_bn_param);
    bind(h, so, "EVP_PKEY_get_octet_string_param", api.pkey_get_octet_string_param);
    bind(h, so, "EVP_PKEY_get_utf8_string_param", api.pkey_get_utf8_string_param);
    bind(h, so, "BN_num_bits", api.bn_num_bits);
    bind(h, so, "BN_bn2bin", api.bn_bn2bin);
    bind(h, so, "BN_free", api.bn_free);
    bind(h, so, "PEM_read_bio_PrivateKey", api.pem_read_bio_privatekey);
    bind(h, so, "EVP_DigestSignInit", api.digest_sign_init);
    bind(h, so, "EVP_DigestSign", api.digest_sign);
  });
  return api;
}

std::string base64Encode(const std::string& text) {
  const auto& crypto = oci::cryptoApi();
  std::string out(4 * ((text.size() + 2) / 3) + 1, '\0');
  const int n = crypto.encode_block(reinterpret_cast<unsigned char*>(out.data()),
                                    reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  out.resize(static_cast<std::size_t>(std::max(n, 0)));
  return out;
}

std::optional<std::string> base64Decode(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  if (text.empty() || text.size() % 4 != 0) return std::nullopt;
  const auto& crypto = oci::cryptoApi();
  std::string out(text.size() / 4 * 3, '\0');
  const int n = crypto.decode_block(reinterpret_cast<unsigned char*>(out.data()),
                                    reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n < 0) return std::nullopt;
  // EVP_DecodeBlock counts the padding's zero bytes too.
  std::size_t padding = 0;
  for (auto it = text.rbegin(); it != text.rend() && *it == '='; ++it) ++padding;
  out.resize(static_cast<std::size_t>(n) - std::min<std::size_t>(padding, static_cast<std::size_t>(n)));
  return out;
}

}  // namespace ctr::image::oci
