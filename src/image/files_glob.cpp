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

namespace ctr::image {

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

bool isDirectory(const fs::path& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool existsNoFollow(const fs::path& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

std::vector<std::string> sortedNames(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    names.push_back(it->path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

fs::path onDisk(const fs::path& base, const std::string& written) {
  if (written.empty()) return base;
  return base / fs::path(written).relative_path();
}

// Every directory below `written` (not itself), not through symlinks, hidden ones left out,
// as bash's globstar walks.
void subdirectories(const fs::path& base, const std::string& written, std::vector<std::string>& out) {
  for (const auto& name : sortedNames(onDisk(base, written))) {
    if (name.front() == '.') continue;
    const std::string child = joinWritten(written, name);
    struct stat st {};
    if (::lstat(onDisk(base, child).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      out.push_back(child);
      subdirectories(base, child, out);
    }
  }
}

}  // namespace

bool isFilesPattern(std::string_view source) {
  for (const auto& component : splitComponents(source))
    if (componentHasGlob(component)) return true;
  return false;
}

std::vector<std::string> expandFilesSource(std::string_view pattern, const std::filesystem::path& base) {
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
      const fs::path dir = onDisk(base, prefix);
      if (component == "**") {
        // Zero or more directories; as the last component, every file and directory below
        // (not the directory itself).
        if (!isDirectory(dir)) continue;
        if (!lastComponent) next.push_back(prefix);
        if (lastComponent) {
          std::vector<std::string> all;
          subdirectories(base, prefix, all);
          std::vector<std::string> dirs = all;
          dirs.insert(dirs.begin(), prefix);
          for (const auto& d : dirs)
            for (const auto& name : sortedNames(onDisk(base, d)))
              if (name.front() != '.') next.push_back(joinWritten(d, name));
        } else {
          subdirectories(base, prefix, next);
        }
      } else if (componentHasGlob(component)) {
        if (!isDirectory(dir)) continue;
        for (const auto& name : sortedNames(dir))
          if (::fnmatch(component.c_str(), name.c_str(), FNM_PERIOD) == 0) next.push_back(joinWritten(prefix, name));
      } else {
        const std::string child = joinWritten(prefix, unescape(component));
        if (existsNoFollow(onDisk(base, child))) next.push_back(child);
      }
    }
    current = std::move(next);
  }
  std::vector<std::string> matches;
  std::set<std::string> seen;
  for (auto& path : current) {
    if (path.empty() || path == "/") continue;
    if (directoriesOnly && !isDirectory(onDisk(base, path))) continue;
    if (directoriesOnly) path += '/';
    if (seen.insert(path).second) matches.push_back(path);
  }
  std::sort(matches.begin(), matches.end());
  if (matches.empty()) throw Error("'" + std::string(pattern) + "' matches nothing");
  return matches;
}

}  // namespace ctr::image
