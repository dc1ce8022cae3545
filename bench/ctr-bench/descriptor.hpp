// Workload descriptors: the YAML file that tells ctr-bench how to run one workload bare and
// in a container and where its figures of merit (FOMs) are (docs/benchmark-guide.md,
// "Workload descriptors"). The suite's own workloads print the JSON contract; a site's
// application gives regexes instead.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "stats.hpp"

namespace ctr::bench {

enum class Profile { Quick, Full };
std::string profileName(Profile p);

struct FomSpec {
  std::string name;
  std::string regex;  // output: regex only; group 1 is the value
  std::string unit;
  std::optional<Direction> direction;  // required with regex; overrides the program's
  std::optional<double> delta;         // overrides the program's
};

struct Descriptor {
  std::filesystem::path file;  // where it was read from (for messages)
  std::string name;
  std::string description;
  // Words may hold the placeholders {bindir} (the suite's programs), {workdir} (the
  // workload's scratch directory, bound into the container at the same path) and {datadir}
  // (the descriptor's directory), replaced by expand(); so may containerArgs.
  std::vector<std::string> command;                       // bare (A) and runtime-overhead B
  std::optional<std::vector<std::string>> quickArgs;      // --quick: command[0] + these
  std::vector<std::string> imageCommand;                  // image-vs-host B (the image's build)
  std::vector<Profile> profiles{Profile::Quick, Profile::Full};  // profiles that run it
  bool mpirun = false;
  int ranks = 1;
  std::vector<std::string> mpirunArgs;
  std::map<std::string, std::string> env;
  std::vector<std::string> requiredPrograms;  // programs that must be found, else skipped
  bool requiresRoot = false;
  std::vector<std::string> setup;     // argv (a string is run with sh -c), once before the blocks
  std::optional<std::vector<std::string>> quickSetup;  // --quick: replaces setup (a smaller data set)
  std::vector<std::string> teardown;  // the same, always after
  std::vector<std::string> binds;  // extra host paths the container needs
  // Options every container launch of this workload needs and a bare launch has no use for
  // (a dataset image: --bind IMAGE:DEST:image-src=/), appended to its `ctr exec` options.
  std::vector<std::string> containerArgs;
  // The workload of the same run whose samples this one's are compared with, side by side,
  // as a data source (source_compare.hpp): not a runtime overhead, no verdict of the run.
  std::string compareSource;
  double timeoutS = 600;
  std::map<Profile, int> blocks;  // initial blocks per profile
  std::map<Profile, int> maxBlocks;
  bool regexOutput = false;  // output: regex (else json)
  // output: regex also searches these files, after stdout and stderr (e.g. hpcc's
  // {workdir}/hpccoutf.txt); each is removed before every launch so no launch reads another's.
  std::vector<std::string> outputFiles;
  std::vector<FomSpec> foms;

  [[nodiscard]] std::vector<std::string> argv(Profile p, bool imageSide) const;
  // The setup of profile `p`: quick_setup with --quick when given, else setup.
  [[nodiscard]] const std::vector<std::string>& setupFor(Profile p) const {
    return p == Profile::Quick && quickSetup ? *quickSetup : setup;
  }
};

struct Placeholders {
  std::string bindir, workdir, datadir;
};
// `words` with {bindir}, {workdir} and {datadir} replaced.
std::vector<std::string> expand(const std::vector<std::string>& words, const Placeholders& p);
std::string expand(const std::string& word, const Placeholders& p);

// "a b  c" -> {"a", "b", "c"}: commands and options given as one string (no shell quoting).
std::vector<std::string> splitOnBlanks(const std::string& text);

// Reads and validates one descriptor; throws ctr::Error "FILE: KEY: problem".
Descriptor loadDescriptor(const std::filesystem::path& file);
// Every *.yaml / *.yml of a directory, sorted by name.
std::vector<Descriptor> loadDescriptorDir(const std::filesystem::path& dir);

}  // namespace ctr::bench
