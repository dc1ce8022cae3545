// OpenPGP clear-signed SIF signatures through GPGME (sif_pgp.hpp).
#include "ctr/sif_pgp.hpp"

#include <gpgme.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>

#include "ctr/error.hpp"
#include "ctr/shared_library.hpp"
#include "ctr/run_process.hpp"

namespace ctr::image::sif {

namespace {

struct GpgmeApi {
  decltype(&gpgme_check_version) check_version;
  decltype(&gpgme_new) create;
  decltype(&gpgme_release) release;
  decltype(&gpgme_set_protocol) set_protocol;
  decltype(&gpgme_ctx_set_engine_info) ctx_set_engine_info;
  decltype(&gpgme_data_new) data_new;
  decltype(&gpgme_data_new_from_mem) data_new_from_mem;
  decltype(&gpgme_data_new_from_file) data_new_from_file;
  decltype(&gpgme_data_release) data_release;
  decltype(&gpgme_data_release_and_get_mem) data_release_and_get_mem;
  decltype(&gpgme_free) free;
  decltype(&gpgme_op_verify) op_verify;
  decltype(&gpgme_op_verify_result) op_verify_result;
  decltype(&gpgme_op_import) op_import;
  decltype(&gpgme_op_import_result) op_import_result;
  decltype(&gpgme_op_keylist_start) op_keylist_start;
  decltype(&gpgme_op_keylist_next) op_keylist_next;
  decltype(&gpgme_op_keylist_end) op_keylist_end;
  decltype(&gpgme_get_key) get_key;
  decltype(&gpgme_key_unref) key_unref;
  decltype(&gpgme_strerror) strerror;
  decltype(&gpgme_hash_algo_name) hash_algo_name;
  decltype(&gpgme_set_armor) set_armor;
  decltype(&gpgme_set_pinentry_mode) set_pinentry_mode;
  decltype(&gpgme_signers_add) signers_add;
  decltype(&gpgme_op_sign) op_sign;
  decltype(&gpgme_op_export) op_export;
  decltype(&gpgme_op_createkey) op_createkey;
  decltype(&gpgme_op_genkey_result) op_genkey_result;
  decltype(&gpgme_pubkey_algo_name) pubkey_algo_name;
};

const GpgmeApi& gpgmeApi() {
  static GpgmeApi api;
  static std::once_flag once;
  std::call_once(once, [] {
    const char* so = "libgpgme.so.11";
    void* h = openLibrary(so, "libgpgme11");
    bindSymbol(h, so, "gpgme_check_version", api.check_version);
    bindSymbol(h, so, "gpgme_new", api.create);
    bindSymbol(h, so, "gpgme_release", api.release);
    bindSymbol(h, so, "gpgme_set_protocol", api.set_protocol);
    bindSymbol(h, so, "gpgme_ctx_set_engine_info", api.ctx_set_engine_info);
    bindSymbol(h, so, "gpgme_data_new", api.data_new);
    bindSymbol(h, so, "gpgme_data_new_from_mem", api.data_new_from_mem);
    bindSymbol(h, so, "gpgme_data_new_from_file", api.data_new_from_file);
    bindSymbol(h, so, "gpgme_data_release", api.data_release);
    bindSymbol(h, so, "gpgme_data_release_and_get_mem", api.data_release_and_get_mem);
    bindSymbol(h, so, "gpgme_free", api.free);
    bindSymbol(h, so, "gpgme_op_verify", api.op_verify);
    bindSymbol(h, so, "gpgme_op_verify_result", api.op_verify_result);
    bindSymbol(h, so, "gpgme_op_import", api.op_import);
    bindSymbol(h, so, "gpgme_op_import_result", api.op_import_result);
    bindSymbol(h, so, "gpgme_op_keylist_start", api.op_keylist_start);
    bindSymbol(h, so, "gpgme_op_keylist_next", api.op_keylist_next);
    bindSymbol(h, so, "gpgme_op_keylist_end", api.op_keylist_end);
    bindSymbol(h, so, "gpgme_get_key", api.get_key);
    bindSymbol(h, so, "gpgme_key_unref", api.key_unref);
    bindSymbol(h, so, "gpgme_strerror", api.strerror);
    bindSymbol(h, so, "gpgme_hash_algo_name", api.hash_algo_name);
    bindSymbol(h, so, "gpgme_set_armor", api.set_armor);
    bindSymbol(h, so, "gpgme_set_pinentry_mode", api.set_pinentry_mode);
    bindSymbol(h, so, "gpgme_signers_add", api.signers_add);
    bindSymbol(h, so, "gpgme_op_sign", api.op_sign);
    bindSymbol(h, so, "gpgme_op_export", api.op_export);
    bindSymbol(h, so, "gpgme_op_createkey", api.op_createkey);
    bindSymbol(h, so, "gpgme_op_genkey_result", api.op_genkey_result);
    bindSymbol(h, so, "gpgme_pubkey_algo_name", api.pubkey_algo_name);
    if (!api.check_version(nullptr)) throw Error("GPGME would not start (gpgme_check_version)");
  });
  return api;
}

struct ContextDeleter {
  void operator()(gpgme_ctx_t c) const { gpgmeApi().release(c); }
};
struct DataDeleter {
  void operator()(gpgme_data_t d) const { gpgmeApi().data_release(d); }
};
using Context = std::unique_ptr<gpgme_context, ContextDeleter>;
using Data = std::unique_ptr<gpgme_data, DataDeleter>;

std::string errorText(gpgme_error_t e) { return gpgmeApi().strerror(e); }

// An OpenPGP context on the GnuPG home `home` (gpg as GPGME finds it).
Context openContext(const std::filesystem::path& home) {
  const auto& api = gpgmeApi();
  gpgme_ctx_t raw = nullptr;
  if (const auto e = api.create(&raw); e != 0) throw Error("GPGME: " + errorText(e));
  Context ctx(raw);
  if (const auto e = api.set_protocol(raw, GPGME_PROTOCOL_OpenPGP); e != 0) throw Error("GPGME: " + errorText(e));
  if (const auto e = api.ctx_set_engine_info(raw, GPGME_PROTOCOL_OpenPGP, nullptr, home.c_str()); e != 0)
    throw Error("GPGME: gpg: " + errorText(e));
  return ctx;
}

Data memoryData(std::string_view bytes) {
  gpgme_data_t raw = nullptr;
  if (const auto e = gpgmeApi().data_new_from_mem(&raw, bytes.data(), bytes.size(), 1); e != 0)
    throw Error("GPGME: " + errorText(e));
  return Data(raw);
}

// The bytes GPGME wrote into `data`, which this releases.
std::string takeBytes(Data data) {
  std::size_t n = 0;
  char* bytes = gpgmeApi().data_release_and_get_mem(data.release(), &n);
  std::string out(bytes ? bytes : "", bytes ? n : 0);
  if (bytes) gpgmeApi().free(bytes);
  return out;
}

// The primary key's fingerprint of the key with (sub)key fingerprint `fpr`; "" if unknown.
std::string primaryFingerprint(gpgme_ctx_t ctx, const char* fpr) {
  gpgme_key_t key = nullptr;
  if (!fpr || gpgmeApi().get_key(ctx, fpr, &key, 0) != 0 || !key) return {};
  std::string primary = key->subkeys && key->subkeys->fpr ? key->subkeys->fpr : "";
  gpgmeApi().key_unref(key);
  return primary;
}

std::filesystem::path makePrivateDirectory() {
  const char* base = ::getenv("XDG_RUNTIME_DIR");
  std::string templ = std::string(base && *base == '/' ? base : "/tmp") + "/ctr-gnupg-XXXXXX";
  if (!::mkdtemp(templ.data())) throw sysError("cannot make a GnuPG home in " + templ.substr(0, templ.rfind('/')));
  return templ;
}

}  // namespace

bool looksClearSigned(std::string_view data) {
  const auto start = data.find_first_not_of(" \t\r\n");
  return start != std::string_view::npos && data.substr(start).starts_with("-----BEGIN PGP SIGNED MESSAGE-----");
}

PgpKeyring::PgpKeyring(const std::vector<std::filesystem::path>& keyFiles) : home_(makePrivateDirectory()) {
  try {
    // What the reference signs with (SHA-256), whatever the key prefers.
    {
      std::ofstream conf(home_ / "gpg.conf");
      conf << "personal-digest-preferences SHA256\ndigest-algo SHA256\n";
    }
    const auto& api = gpgmeApi();
    Context ctx = openContext(home_);
    for (const auto& file : keyFiles) {
      gpgme_data_t raw = nullptr;
      if (const auto e = api.data_new_from_file(&raw, file.c_str(), 1); e != 0)
        throw Error("OpenPGP key file " + file.string() + ": " + errorText(e));
      Data keys(raw);
      const auto e = api.op_import(ctx.get(), keys.get());
      const gpgme_import_result_t r = e == 0 ? api.op_import_result(ctx.get()) : nullptr;
      // A secret key goes to gpg-agent, which gpg started for this home: it is stopped below.
      if (r && r->secret_read > 0) agent_ = true;
      if (!r || r->considered == 0 || r->imported + r->unchanged == 0)
        throw Error("OpenPGP key file " + file.string() + ": no key gpg could import" + (e ? ": " + errorText(e) : ""));
    }
  } catch (...) {
    removeHome();
    throw;
  }
}

PgpKeyring::~PgpKeyring() { removeHome(); }

void PgpKeyring::removeHome() noexcept {
  if (agent_) {
    try {
      ProcessOptions quiet;
      quiet.captureStdout = quiet.captureStderr = true;
      (void)runProcess({"gpgconf", "--homedir", home_.string(), "--kill", "all"}, quiet);
    } catch (...) {
      // Nothing more to do: the directory goes, and an agent whose home is gone exits.
    }
  }
  // gpgconf returns before the agent has gone, and the agent removes its sockets as it goes:
  // a directory emptied while it still writes is tried again, for up to a second.
  for (int i = 0; i < 20; ++i) {
    std::error_code ec;
    std::filesystem::remove_all(home_, ec);
    if (!std::filesystem::exists(home_, ec)) return;
    ::usleep(50'000);
  }
}

PgpCheck PgpKeyring::verifyClearSigned(std::string_view block) const {
  const auto& api = gpgmeApi();
  Context ctx = openContext(home_);
  Data signature = memoryData(block);
  gpgme_data_t rawPlain = nullptr;
  if (const auto e = api.data_new(&rawPlain); e != 0) throw Error("GPGME: " + errorText(e));
  Data plain(rawPlain);
  PgpCheck check;
  const auto e = api.op_verify(ctx.get(), signature.get(), nullptr, plain.get());
  const gpgme_verify_result_t result = e == 0 ? api.op_verify_result(ctx.get()) : nullptr;
  check.text = takeBytes(std::move(plain));
  if (check.text.ends_with('\n')) check.text.pop_back();
  if (!result || !result->signatures) {
    check.error = e != 0 ? errorText(e) : "no signature in the clear-signed block";
    return check;
  }
  const gpgme_signature_t s = result->signatures;
  const char* hash = api.hash_algo_name(s->hash_algo);
  check.hash = hash ? hash : "unknown";
  if (gpgme_err_code(s->status) != GPG_ERR_NO_ERROR) {
    check.error = gpgme_err_code(s->status) == GPG_ERR_NO_PUBKEY
                      ? std::string("signed by key ") + (s->fpr ? s->fpr : "?") + ", which the keyring does not have"
                      : errorText(s->status);
    return check;
  }
  check.primaryFingerprint = primaryFingerprint(ctx.get(), s->fpr);
  check.good = !check.primaryFingerprint.empty();
  if (!check.good) check.error = "the signing key is not in the keyring";
  return check;
}

namespace {

// The secret key to sign with: `fingerprint`'s, else the keyring's one secret key.
gpgme_key_t secretKey(gpgme_ctx_t ctx, const std::string& fingerprint) {
  const auto& api = gpgmeApi();
  gpgme_key_t found = nullptr;
  int count = 0;
  if (api.op_keylist_start(ctx, fingerprint.empty() ? nullptr : fingerprint.c_str(), 1) != 0)
    throw Error("GPGME: cannot list the keyring's secret keys");
  for (gpgme_key_t key = nullptr; api.op_keylist_next(ctx, &key) == 0 && key;) {
    if (++count == 1) found = key;
    else api.key_unref(key);
  }
  api.op_keylist_end(ctx);
  if (count == 1) return found;
  if (found) api.key_unref(found);
  if (count == 0)
    throw Error(fingerprint.empty() ? std::string("the OpenPGP key files hold no secret key")
                                    : "no secret key " + fingerprint + " in the OpenPGP key files");
  throw Error("the OpenPGP key files hold " + std::to_string(count) + " secret keys: name one with --fingerprint");
}

}  // namespace

PgpKeyring::Signed PgpKeyring::clearSign(std::string_view text, const std::string& fingerprint) const {
  const auto& api = gpgmeApi();
  Context ctx = openContext(home_);
  gpgme_key_t key = secretKey(ctx.get(), fingerprint);
  Signed out;
  out.primaryFingerprint = key->subkeys && key->subkeys->fpr ? key->subkeys->fpr : "";
  const auto added = api.signers_add(ctx.get(), key);
  api.key_unref(key);
  if (added != 0) throw Error("GPGME: " + errorText(added));
  api.set_armor(ctx.get(), 1);
  // No passphrase is asked for: a key that has one fails here instead of waiting on a prompt.
  (void)api.set_pinentry_mode(ctx.get(), GPGME_PINENTRY_MODE_LOOPBACK);
  Data plain = memoryData(text);
  gpgme_data_t rawSig = nullptr;
  if (const auto e = api.data_new(&rawSig); e != 0) throw Error("GPGME: " + errorText(e));
  Data sig(rawSig);
  if (const auto e = api.op_sign(ctx.get(), plain.get(), sig.get(), GPGME_SIG_MODE_CLEAR); e != 0)
    throw Error("gpg could not sign: " + errorText(e));
  out.block = takeBytes(std::move(sig));
  return out;
}

std::vector<std::string> PgpKeyring::fingerprints() const {
  const auto& api = gpgmeApi();
  Context ctx = openContext(home_);
  std::vector<std::string> out;
  if (api.op_keylist_start(ctx.get(), nullptr, 0) != 0) return out;
  for (gpgme_key_t key = nullptr; api.op_keylist_next(ctx.get(), &key) == 0 && key;) {
    if (key->subkeys && key->subkeys->fpr) out.emplace_back(key->subkeys->fpr);
    api.key_unref(key);
  }
  api.op_keylist_end(ctx.get());
  return out;
}

std::vector<PgpKeyInfo> PgpKeyring::keys(bool secret) const {
  const auto& api = gpgmeApi();
  Context ctx = openContext(home_);
  std::vector<PgpKeyInfo> out;
  if (const auto e = api.op_keylist_start(ctx.get(), nullptr, secret ? 1 : 0); e != 0)
    throw Error("GPGME: cannot list the keys: " + errorText(e));
  for (gpgme_key_t key = nullptr; api.op_keylist_next(ctx.get(), &key) == 0 && key;) {
    PgpKeyInfo info;
    if (const gpgme_subkey_t primary = key->subkeys) {
      info.fingerprint = primary->fpr ? primary->fpr : "";
      const char* algo = api.pubkey_algo_name(primary->pubkey_algo);
      info.algorithm = algo ? algo : "unknown";
      info.bits = primary->length;
      info.created = primary->timestamp;
    }
    if (key->uids && key->uids->uid) info.userId = key->uids->uid;
    api.key_unref(key);
    if (!info.fingerprint.empty()) out.push_back(std::move(info));
  }
  api.op_keylist_end(ctx.get());
  return out;
}

std::string PgpKeyring::exportKey(const std::string& fingerprint, bool secret, bool armor) const {
  const auto& api = gpgmeApi();
  Context ctx = openContext(home_);
  api.set_armor(ctx.get(), armor ? 1 : 0);
  (void)api.set_pinentry_mode(ctx.get(), GPGME_PINENTRY_MODE_LOOPBACK);  // no prompt: a passphrase fails
  gpgme_data_t raw = nullptr;
  if (const auto e = api.data_new(&raw); e != 0) throw Error("GPGME: " + errorText(e));
  Data data(raw);
  if (const auto e = api.op_export(ctx.get(), fingerprint.c_str(), secret ? GPGME_EXPORT_MODE_SECRET : 0, data.get()); e != 0)
    throw Error("gpg could not export " + std::string(secret ? "the secret key " : "the key ") + fingerprint + ": " +
                errorText(e) + (secret ? " (ctr keeps only secret keys without a passphrase)" : ""));
  std::string bytes = takeBytes(std::move(data));
  if (bytes.empty())
    throw Error("gpg exported nothing for " + std::string(secret ? "the secret key " : "the key ") + fingerprint +
                (secret ? " (a secret key with a passphrase cannot be kept: ctr asks for none)" : ""));
  return bytes;
}

std::string PgpKeyring::createKey(const std::string& userId, unsigned bits) {
  const auto& api = gpgmeApi();
  Context ctx = openContext(home_);
  agent_ = true;  // gpg-agent keeps the new secret key for this home
  const std::string algo = "rsa" + std::to_string(bits);
  const unsigned flags = GPGME_CREATE_SIGN | GPGME_CREATE_CERT | GPGME_CREATE_NOPASSWD | GPGME_CREATE_NOEXPIRE;
  if (const auto e = api.op_createkey(ctx.get(), userId.c_str(), algo.c_str(), 0, 0, nullptr, flags); e != 0)
    throw Error("gpg could not create a " + algo + " key for '" + userId + "': " + errorText(e));
  const gpgme_genkey_result_t r = api.op_genkey_result(ctx.get());
  if (!r || !r->fpr) throw Error("gpg created a key but named no fingerprint");
  return r->fpr;
}

}  // namespace ctr::image::sif
