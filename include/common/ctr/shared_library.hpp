// Libraries ctr loads with dlopen the first time a command needs them (libcurl, libarchive,
// libcrypto and GPGME for images, libyaml for CDI specs): ctr itself links only libc, since one
// ctr starts per MPI rank and every linked library is mapped and relocated at each start.
#pragma once

namespace ctr {

// dlopen of `soname` (now, local); throws ctr::Error naming the Debian `package` to install.
void* openLibrary(const char* soname, const char* package);
// dlsym of `symbol` in that library; throws ctr::Error naming it when missing.
void* librarySymbol(void* handle, const char* soname, const char* symbol);
// librarySymbol into `slot`, a pointer of the function's own type (decltype(&function)).
template <typename T>
void bindSymbol(void* handle, const char* soname, const char* symbol, T& slot) {
  slot = reinterpret_cast<T>(librarySymbol(handle, soname, symbol));
}

}  // namespace ctr
