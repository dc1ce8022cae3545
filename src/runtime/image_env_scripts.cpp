#include "image_env_scripts.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#include "ctr/environment.hpp"
#include "ctr/error.hpp"
#include "ctr/fd.hpp"

namespace ctr::runtime {
namespace {

// Env scripts larger than this are not interpreted (nor anything else read from an image
// unbounded): stock ones are under 1 KiB.
constexpr std::size_t kMaxEnvScript = 1 << 20;
constexpr std::string_view kCopyMagic = "ctr-env-scripts 1\n";

}  // namespace

std::vector<std::string> listEnvScripts() {
  std::vector<std::string> names;
  DIR* dir = ::opendir(std::string(launch::kEnvScriptDir).c_str());
  if (!dir) {
    struct stat st {};
    if (::stat("/environment", &st) == 0 && S_ISREG(st.st_mode)) names.emplace_back("/environment");
    return names;
  }
  while (dirent* e = ::readdir(dir)) {
    size_t n = std::strlen(e->d_name);
    if (n > 3 && std::strcmp(e->d_name + n - 3, ".sh") == 0 && e->d_name[0] != '.')
      names.emplace_back(std::string(launch::kEnvScriptDir) + "/" + e->d_name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

std::optional<std::string> readEnvScript(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  return readCheckedFile(fd.get(), kMaxEnvScript, "the image's " + path);
}

std::vector<EnvScript> readAllEnvScripts() {
  std::vector<EnvScript> scripts;
  for (auto& path : listEnvScripts()) {
    auto text = readEnvScript(path);
    scripts.push_back({std::move(path), std::move(text)});
  }
  return scripts;
}

// "ctr-env-scripts 1\n", then per script "PATH\nLENGTH\nTEXT" (LENGTH -1: unreadable).
void writeEnvScriptCopy(const std::string& file, const std::vector<EnvScript>& scripts) {
  std::string out(kCopyMagic);
  for (const auto& s : scripts) {
    out += s.path + '\n' + (s.text ? std::to_string(s.text->size()) : "-1") + '\n';
    if (s.text) out += *s.text;
  }
  writeFile(file, out);
}

std::optional<std::vector<EnvScript>> readEnvScriptCopy(const std::string& file) {
  const std::string data = readFileIfPresent(file);
  if (!data.starts_with(kCopyMagic)) return std::nullopt;
  std::vector<EnvScript> scripts;
  std::size_t at = kCopyMagic.size();
  while (at < data.size()) {
    const auto pathEnd = data.find('\n', at);
    if (pathEnd == std::string::npos) return std::nullopt;
    const auto lengthEnd = data.find('\n', pathEnd + 1);
    if (lengthEnd == std::string::npos) return std::nullopt;
    EnvScript s{data.substr(at, pathEnd - at), std::nullopt};
    const std::string_view length(data.data() + pathEnd + 1, lengthEnd - pathEnd - 1);
    at = lengthEnd + 1;
    if (length != "-1") {
      std::size_t n = 0;
      auto [end, ec] = std::from_chars(length.data(), length.data() + length.size(), n);
      if (ec != std::errc{} || end != length.data() + length.size() || n > data.size() - at) return std::nullopt;
      s.text = data.substr(at, n);
      at += n;
    }
    scripts.push_back(std::move(s));
  }
  return scripts;
}

}  // namespace ctr::runtime
