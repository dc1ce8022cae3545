#include "result.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "ctr/error.hpp"
#include "ctr/fd.hpp"

namespace ctr::bench {

void validateResult(const nlohmann::json& r, const std::string& name) {
  auto bad = [&](const std::string& problem) { throw Error(name + ": " + problem); };
  if (!r.is_object()) bad("not a ctr-bench result (the top level is not a JSON object)");
  if (!r.contains("format") || r["format"] != kResultFormat)
    bad("not a ctr-bench result (\"format\" is " + (r.contains("format") ? r["format"].dump() : std::string("missing")) +
        ", expected \"" + kResultFormat + "\")");
  if (!r.contains("version") || !r["version"].is_number_integer())
    bad("result file without a version number");
  if (r["version"].get<int>() != kResultVersion)
    bad("result file version " + r["version"].dump() + " is not supported by this ctr-bench (it reads version " +
        std::to_string(kResultVersion) + ")");
  if (!r.contains("workloads") || !r["workloads"].is_array()) bad("\"workloads\" is missing or not a list");
  for (size_t i = 0; i < r["workloads"].size(); ++i) {
    const auto& w = r["workloads"][i];
    std::string where = "workloads[" + std::to_string(i) + "]";
    if (!w.is_object() || !w.contains("name") || !w["name"].is_string()) bad(where + ": no name");
    if (!w.contains("foms") || !w["foms"].is_array()) bad(where + " (" + w["name"].get<std::string>() + "): \"foms\" is missing or not a list");
    for (const auto& f : w["foms"]) {
      if (!f.is_object() || !f.contains("name") || !f.contains("samples") || !f["samples"].is_object())
        bad(where + " (" + w["name"].get<std::string>() + "): a FOM without name or samples");
      for (const char* side : {"A", "B"}) {
        if (!f["samples"].contains(side) || !f["samples"][side].is_array())
          bad(where + " (" + w["name"].get<std::string>() + "), FOM " + f["name"].dump() + ": samples." + side + " is not a list");
        for (const auto& v : f["samples"][side])
          if (!v.is_null() && !v.is_number())
            bad(where + " (" + w["name"].get<std::string>() + "), FOM " + f["name"].dump() + ": a sample is not a number");
      }
    }
  }
}

nlohmann::json readResultFile(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw Error(file.string() + ": cannot read the result file");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json r = nlohmann::json::parse(text.str(), nullptr, false);
  if (r.is_discarded()) throw Error(file.string() + ": not a ctr-bench result (not valid JSON; a corrupt or truncated file?)");
  validateResult(r, file.string());
  return r;
}

void writeResultAtomic(const std::filesystem::path& file, const nlohmann::json& result) {
  auto dir = file.parent_path().empty() ? std::filesystem::path(".") : file.parent_path();
  std::string tmpl = (dir / ("." + file.filename().string() + ".XXXXXX")).string();
  UniqueFd fd(::mkostemp(tmpl.data(), O_CLOEXEC));
  if (!fd) throw sysError("cannot create a temporary file beside " + file.string());
  std::string text = result.dump(1) + "\n";
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(fd.get(), p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::unlink(tmpl.c_str());
      throw sysError("write " + tmpl, err);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  ::fchmod(fd.get(), 0644);
  if (::fsync(fd.get()) != 0 || ::rename(tmpl.c_str(), file.c_str()) != 0) {
    int err = errno;
    ::unlink(tmpl.c_str());
    throw sysError("cannot write " + file.string(), err);
  }
}

}  // namespace ctr::bench
