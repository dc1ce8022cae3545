// %files sources as glob patterns, as Apptainer expands them (internal/pkg/build/files: the
// source is a shell word expanded with globstar): `*`, `?` and `[...]` within one path
// component, `**` as a whole component for any number of directories, a leading `.` matched
// only by a pattern that starts with one (no dotglob), a backslash quoting the next
// character. Results are sorted; a pattern that matches nothing is an error here (Apptainer
// hands the pattern to cp, which then fails on a file of that name).
#include <fnmatch.h>
#include <sys/stat.h>

#include <algorithm>
#include <set>

#include "ctr/build.hpp"
#include "ctr/error.hpp"
#include "ctr/image_tree.hpp"

namespace ctr::builder {

namespace {

namespace fs = std::filesystem;

bool componentHasGlob(std::string_view component) {
  for (std::size_t i = 0; i < component.size(); ++i) {
    if (component[i] == '\\') {
      ++i;
      continue;
    }
    if (component[i] == '*' || component[i] == '?') return true;
    if (component[i] == '[' && component.find(']', i + 2) != std::string_view::npos) return true;
  }
  return false;
}

std::string unescape(std::string_view component) {
  std::string out;
  for (std::size_t i = 0; i < component.size(); ++i) {
    if (component[i] == '\\' && i + 1 < component.size()) ++i;
    out += component[i];
  }
  return out;
}

std::vector<std::string> splitComponents(std::string_view path) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    if (end > start) parts.emplace_back(path.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

// A path is handled as "written", as the result shows it (relative or absolute as the
// pattern is); onDisk(base, written) is where it lies on this machine.
std::string joinWritten(const std::string& prefix, const std::string& name) {
  if (prefix.empty()) return name;
  if (prefix.back() == '/') return prefix + name;
  return prefix + "/" + name;
}

// Where the pattern's paths lie: on the host under `base`, or inside an image (a stage's
// root, looked up there so that its symlinks never lead to the host).
struct Where {
  fs::path base;
  const image::ImageTree* tree = nullptr;

  [[nodiscard]] fs::path onDisk(const std::string& written) const {
    if (written.empty()) return base;
    return base / fs::path(written).relative_path();
  }
  [[nodiscard]] bool isDirectory(const std::string& written) const {
    if (tree) return tree->isDirectory(written);
    struct stat st {};
    return ::stat(onDisk(written).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  }
  [[nodiscard]] bool isRealDirectory(const std::string& written) const {
    if (tree) return tree->isRealDirectory(written);
    struct stat st {};
    return ::lstat(onDisk(written).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  }
  [[nodiscard]] bool existsNoFollow(const std::string& written) const {
    if (tree) return tree->exists(written);
    struct stat st {};
    return ::lstat(onDisk(written).c_str(), &st) == 0;
  }
  [[nodiscard]] std::vector<std::string> sortedNames(const std::string& written) const {
    if (tree) return tree->entries(written);
    std::vector<std::string> names;
    std::error_code ec;
    for (fs::directory_iterator it(onDisk(written), ec), end; !ec && it != end; it.increment(ec))
      names.push_back(it->path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
};

// Every directory below `written` (not itself), not through symlinks, hidden ones left out,
// as bash's globstar walks.
void subdirectories(const Where& where, const std::string& written, std::vector<std::string>& out) {
  for (const auto& name : where.sortedNames(written)) {
    if (name.front() == '.') continue;
    const std::string child = joinWritten(written, name);
    if (where.isRealDirectory(child)) {
      out.push_back(child);
      subdirectories(where, child, out);
    }
  }
}

std::vector<std::string> expand(std::string_view pattern, const Where& where) {
  if (!isFilesPattern(pattern)) return {std::string(pattern)};
  const bool absolute = pattern.starts_with('/');
  const bool directoriesOnly = pattern.ends_with('/');
  const auto components = splitComponents(pattern);
  std::vector<std::string> current{absolute ? "/" : ""};
  for (std::size_t i = 0; i < components.size(); ++i) {
    const std::string& component = components[i];
    const bool lastComponent = i + 1 == components.size();
    std::vector<std::string> next;
    for (const auto& prefix : current) {
      if (component == "**") {
        // Zero or more directories; as the last component, every file and directory below
        // (not the directory itself).
        if (!where.isDirectory(prefix)) continue;
        if (!lastComponent) next.push_back(prefix);
        if (lastComponent) {
          std::vector<std::string> all;
          subdirectories(where, prefix, all);
          std::vector<std::string> dirs = all;
          dirs.insert(dirs.begin(), prefix);
          for (const auto& d : dirs)
            for (const auto& name : where.sortedNames(d))
              if (name.front() != '.') next.push_back(joinWritten(d, name));
        } else {
          subdirectories(where, prefix, next);
        }
      } else if (componentHasGlob(component)) {
        if (!where.isDirectory(prefix)) continue;
        for (const auto& name : where.sortedNames(prefix))
          if (::fnmatch(component.c_str(), name.c_str(), FNM_PERIOD) == 0) next.push_back(joinWritten(prefix, name));
      } else {
        const std::string child = joinWritten(prefix, unescape(component));
        if (where.existsNoFollow(child)) next.push_back(child);
      }
    }
    current = std::move(next);
  }
  std::vector<std::string> matches;
  std::set<std::string> seen;
  for (auto& path : current) {
    if (path.empty() || path == "/") continue;
    if (directoriesOnly && !where.isDirectory(path)) continue;
    if (directoriesOnly) path += '/';
    if (seen.insert(path).second) matches.push_back(path);
  }
  std::sort(matches.begin(), matches.end());
  if (matches.empty()) throw Error("'" + std::string(pattern) + "' matches nothing");
  return matches;
}

}  // namespace

bool isFilesPattern(std::string_view source) {
  for (const auto& component : splitComponents(source))
    if (componentHasGlob(component)) return true;
  return false;
}

std::vector<std::string> expandFilesSource(std::string_view pattern, const std::filesystem::path& base) {
  return expand(pattern, Where{base, nullptr});
}

std::vector<std::string> expandFilesSourceInImage(std::string_view pattern, const image::ImageTree& tree) {
  return expand(pattern, Where{tree.path(), &tree});
}

}  // namespace ctr::builder
