// libFuzzer target: the definition-file parser must refuse any malformed text with
// ctr::Error, never crash; what it accepts must be consistent and go through the helpers
// the builder uses.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>

#include "ctr/deffile.hpp"
#include "ctr/error.hpp"

namespace {

namespace deffile = ctr::builder::deffile;

void useSection(const deffile::Section& section) {
  try {
    (void)deffile::scriptCommand(section, "/.script");
  } catch (const ctr::Error&) {
  }
  (void)deffile::shebangScript(section);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  static const std::map<std::string, std::string> buildArgs{{"VERSION", "1.2"}, {"MULTI", "a b"}};
  deffile::DefinitionFile file;
  try {
    file = deffile::parseDefinition(text, "fuzz.def", buildArgs);
  } catch (const ctr::Error&) {
    return 0;
  }
  // Invariants of an accepted definition: at least one stage, each with a Bootstrap value,
  // and the stored text is the stages' text.
  if (file.stages.empty()) std::abort();
  std::string stored;
  for (const auto& stage : file.stages) {
    if (stage.header.bootstrap().empty()) std::abort();
    stored += stage.raw;
    for (const auto* s :
         {&stage.pre, &stage.setup, &stage.post, &stage.test, &stage.runscript, &stage.startscript})
      useSection(*s);
    for (const auto& app : stage.apps) useSection(app.install);
    const std::string formatted = deffile::formatDefinition(stage);
    try {
      (void)deffile::parseDefinition(formatted, "formatted.def", buildArgs);
    } catch (const ctr::Error&) {
    }
  }
  if (stored != file.storedText) std::abort();
  return 0;
}
