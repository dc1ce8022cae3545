#include "ctr/shared_library.hpp"

#include <dlfcn.h>

#include <string>

#include "ctr/error.hpp"

namespace ctr {

void* openLibrary(const char* soname, const char* package) {
  void* handle = ::dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = ::dlerror();
    throw Error(std::string("cannot load ") + soname + " (install the Debian package " + package +
                "): " + (why ? why : "unknown error"));
  }
  return handle;
}

void* librarySymbol(void* handle, const char* soname, const char* symbol) {
  void* address = ::dlsym(handle, symbol);
  if (!address) throw Error(std::string(soname) + ": no symbol " + symbol);
  return address;
}

}  // namespace ctr
