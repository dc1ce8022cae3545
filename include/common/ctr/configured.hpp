// Paths and versions fixed at build time. Unprivileged ctr looks for its files and programs
// relative to its executable first (ctr/install_paths.hpp); the k*Path constants are the
// configured install, which the setuid helper's checks keep using.
//
// Defined in one generated file (configured.cpp.in): a tree configured for another prefix
// (the Debian packages' beside the test build) differs in that file only, so that every
// other object is the same and a compiler cache serves it.
#pragma once

namespace ctr::configured {
extern const char* const kVersion;
// The Apptainer release whose behaviour ctr follows, reported under the drop-in names.
extern const char* const kApptainerVersion;
extern const char* const kSysconfPath;
extern const char* const kHelperPath;
extern const char* const kHelperRundir;  // the helper's mount points: mnt (image), data/I (I-th dataset)
extern const char* const kHelperCheckUser;  // the user the helper runs an execution rule's check as
extern const char* const kDataDir;
// The configured prefix and the install directories relative to it (GNUInstallDirs).
extern const char* const kInstallPrefix;
extern const char* const kBinDir;
extern const char* const kLibexecDir;
extern const char* const kSysconfDir;
extern const char* const kFusermount;
}  // namespace ctr::configured
