// Writes the ctr.conf keys ctr knows (config::knownKeys(), its setter table) as C string
// literals, one a line, into the file named by its argument: helper_parse.c includes it as
// the list of keys the setuid helper accepts, refusing any other as ctr does. One list, made
// from ctr's own at build time, so that the two parsers cannot disagree on which keys exist
// (they did, as two hand-kept lists, until a test compared them). Never installed.
#include <cstdio>
#include <string>

#include "ctr/config.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: ctr-config-keys OUT.inc\n");
    return 2;
  }
  const std::string out = argv[1], tmp = out + ".tmp";
  std::FILE* file = std::fopen(tmp.c_str(), "w");
  if (file == nullptr) {
    std::perror(tmp.c_str());
    return 1;
  }
  for (const std::string& key : ctr::config::knownKeys()) {
    // A key is lowercase words: nothing in it needs escaping in C, and anything else is a
    // mistake in ctr's table, not something to write into the helper.
    for (const char c : key)
      if (!((c >= 'a' && c <= 'z') || c == ' ')) {
        std::fprintf(stderr, "ctr-config-keys: key '%s' is not lowercase words\n", key.c_str());
        return 1;
      }
    std::fprintf(file, "\"%s\",\n", key.c_str());
  }
  if (std::fclose(file) != 0 || std::rename(tmp.c_str(), out.c_str()) != 0) {
    std::perror(out.c_str());
    return 1;
  }
  return 0;
}
