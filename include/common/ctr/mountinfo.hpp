// One line of /proc/PID/mountinfo (proc(5)):
// "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS".
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ctr {

struct MountInfoLine {
  std::string mountPoint;                   // as the kernel escapes it (a space is "\040")
  std::vector<std::string> optionalFields;  // "shared:N", "master:N", "propagate_from:N", "unbindable"
  std::string fsType, superOptions;
};

// nullopt for a line that is not one (too few fields, no "-" separator).
[[nodiscard]] std::optional<MountInfoLine> parseMountInfoLine(std::string_view line);

}  // namespace ctr
