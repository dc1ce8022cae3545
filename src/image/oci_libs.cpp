#include "oci_libs.hpp"

#include <algorithm>
#include <cctype>
#include <mutex>
#include <string>

#include "ctr/error.hpp"
#include "ctr/shared_library.hpp"

namespace ctr::image::oci {

const CurlApi& curlApi() {
  static CurlApi api;
  static std::once_flag once;
  std::call_once(once, [] {
    const char* so = "libcurl.so.4";
    void* h = openLibrary(so, "libcurl4");
    bindSymbol(h, so, "curl_global_init", api.global_init);
    bindSymbol(h, so, "curl_easy_init", api.easy_init);
    bindSymbol(h, so, "curl_easy_setopt", api.easy_setopt);
    bindSymbol(h, so, "curl_easy_perform", api.easy_perform);
    bindSymbol(h, so, "curl_easy_getinfo", api.easy_getinfo);
    bindSymbol(h, so, "curl_easy_cleanup", api.easy_cleanup);
    bindSymbol(h, so, "curl_easy_reset", api.easy_reset);
    bindSymbol(h, so, "curl_easy_strerror", api.easy_strerror);
    bindSymbol(h, so, "curl_slist_append", api.slist_append);
    bindSymbol(h, so, "curl_slist_free_all", api.slist_free_all);
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
    bindSymbol(h, so, "archive_read_new", api.read_new);
    bindSymbol(h, so, "archive_read_support_filter_all", api.read_support_filter_all);
    bindSymbol(h, so, "archive_read_support_format_tar", api.read_support_format_tar);
    bindSymbol(h, so, "archive_read_open", api.read_open);
    bindSymbol(h, so, "archive_read_open_memory", api.read_open_memory);
    bindSymbol(h, so, "archive_read_next_header", api.read_next_header);
    bindSymbol(h, so, "archive_read_data_block", api.read_data_block);
    bindSymbol(h, so, "archive_read_free", api.read_free);
    bindSymbol(h, so, "archive_filter_bytes", api.filter_bytes);
    bindSymbol(h, so, "archive_error_string", api.error_string);
    bindSymbol(h, so, "archive_entry_pathname", api.entry_pathname);
    bindSymbol(h, so, "archive_entry_filetype", api.entry_filetype);
    bindSymbol(h, so, "archive_entry_perm", api.entry_perm);
    bindSymbol(h, so, "archive_entry_uid", api.entry_uid);
    bindSymbol(h, so, "archive_entry_gid", api.entry_gid);
    bindSymbol(h, so, "archive_entry_symlink", api.entry_symlink);
    bindSymbol(h, so, "archive_entry_hardlink", api.entry_hardlink);
    bindSymbol(h, so, "archive_entry_mtime", api.entry_mtime);
    bindSymbol(h, so, "archive_entry_mtime_nsec", api.entry_mtime_nsec);
    bindSymbol(h, so, "archive_entry_rdev", api.entry_rdev);
    bindSymbol(h, so, "archive_entry_size", api.entry_size);
  });
  return api;
}

const CryptoApi& cryptoApi() {
  static CryptoApi api;
  static std::once_flag once;
  std::call_once(once, [] {
    const char* so = "libcrypto.so.3";
    void* h = openLibrary(so, "libssl3");
    bindSymbol(h, so, "EVP_MD_CTX_new", api.md_ctx_new);
    bindSymbol(h, so, "EVP_MD_CTX_free", api.md_ctx_free);
    bindSymbol(h, so, "EVP_sha256", api.sha256);
    bindSymbol(h, so, "EVP_sha384", api.sha384);
    bindSymbol(h, so, "EVP_sha512", api.sha512);
    bindSymbol(h, so, "EVP_DigestInit_ex", api.digest_init_ex);
    bindSymbol(h, so, "EVP_DigestUpdate", api.digest_update);
    bindSymbol(h, so, "EVP_DigestFinal_ex", api.digest_final_ex);
    bindSymbol(h, so, "EVP_EncodeBlock", api.encode_block);
    bindSymbol(h, so, "EVP_DecodeBlock", api.decode_block);
    bindSymbol(h, so, "BIO_new_mem_buf", api.bio_new_mem_buf);
    bindSymbol(h, so, "BIO_free", api.bio_free);
    bindSymbol(h, so, "PEM_read_bio_PUBKEY", api.pem_read_bio_pubkey);
    bindSymbol(h, so, "EVP_PKEY_free", api.pkey_free);
    bindSymbol(h, so, "EVP_PKEY_is_a", api.pkey_is_a);
    bindSymbol(h, so, "EVP_DigestVerifyInit", api.digest_verify_init);
    bindSymbol(h, so, "EVP_DigestVerify", api.digest_verify);
    bindSymbol(h, so, "EVP_PKEY_get_raw_public_key", api.pkey_get_raw_public_key);
    bindSymbol(h, so, "EVP_PKEY_get_bn_param", api.pkey_get_bn_param);
    bindSymbol(h, so, "EVP_PKEY_get_octet_string_param", api.pkey_get_octet_string_param);
    bindSymbol(h, so, "EVP_PKEY_get_utf8_string_param", api.pkey_get_utf8_string_param);
    bindSymbol(h, so, "BN_num_bits", api.bn_num_bits);
    bindSymbol(h, so, "BN_bn2bin", api.bn_bn2bin);
    bindSymbol(h, so, "BN_free", api.bn_free);
    bindSymbol(h, so, "PEM_read_bio_PrivateKey", api.pem_read_bio_privatekey);
    bindSymbol(h, so, "EVP_DigestSignInit", api.digest_sign_init);
    bindSymbol(h, so, "EVP_DigestSign", api.digest_sign);
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
