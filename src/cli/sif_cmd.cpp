// `ctr sif`: siftool's commands (header, list, info, dump, new, add, del, setprim) with the
// same argument forms and byte-identical output (sif-format.md §12).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>
#include <memory>

#include "commands.hpp"
#include "ctr/chunk_table.hpp"
#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/sif.hpp"
#include "ctr/standard_streams.hpp"

namespace ctr::cli {

namespace {

namespace sif = ctr::image::sif;

struct SifArgs {
  std::string image;
  std::string object;
  std::uint32_t id = 0;
  int dataType = 0;
  std::int32_t partType = 0;
  std::int32_t partFs = 0;
  std::int32_t partArch = 0;
  std::int32_t signHash = 0;
  std::string signEntity;
  std::uint32_t groupId = 0;
  std::uint32_t linkId = 0;
  std::int64_t alignment = 0;
  std::string name;
};

int runAdd(const SifArgs& a, const CLI::App& cmd) {
  if (a.dataType < 1 || a.dataType > 11) throw Error("--datatype must be 1..11");
  sif::ObjectInput in;
  in.type = static_cast<sif::DataType>(0x4000 + a.dataType);
  if (cmd.count("--groupid") > 0) in.group = a.groupId;
  if (cmd.count("--linkid") > 0) in.linkedId = a.linkId;
  if (cmd.count("--alignment") > 0) in.alignment = a.alignment;
  in.name = cmd.count("--filename") > 0 ? a.name : std::filesystem::path(a.object).filename().string();
  if (in.type == sif::DataType::Partition) {
    if (a.partType == 0 || a.partFs == 0 || a.partArch == 0) {
      throw Error("with --datatype 4 (partition), --parttype, --partfs and --partarch are required");
    }
    std::array<char, 3> code{static_cast<char>('0' + a.partArch / 10 % 10),
                             static_cast<char>('0' + a.partArch % 10), '\0'};
    in.partition = sif::PartitionInfo{static_cast<sif::FsType>(a.partFs),
                                      static_cast<sif::PartType>(a.partType), sif::archName(code)};
  }
  if (in.type == sif::DataType::Signature) {
    if (a.signHash == 0 || a.signEntity.empty()) {
      throw Error("with --datatype 5 (signature), --signhash and --signentity are required");
    }
    in.hashType = a.signHash;
    in.entityHex = a.signEntity;
  }
  UniqueFd data(::open(a.object.c_str(), O_RDONLY | O_CLOEXEC));
  if (!data) throw sysError(a.object);
  struct stat st {};
  if (::fstat(data.get(), &st) != 0) throw sysError(a.object);
  in.data = sif::DataSource::fromFd(data.get(), st.st_size);
  auto image = sif::Image::open(a.image, true);
  sif::Editor editor(image);
  withContext(a.image, [&] { editor.add(in, editor.defaultTime()); });
  return 0;
}

using SharedArgs = std::shared_ptr<SifArgs>;

void registerHeader(CLI::App& sifCmd, Context& ctx, const SharedArgs& args) {
  auto* header = sifCmd.add_subcommand("header", "Display the global header");
  header->add_option("file", args->image, "SIF image")->required();
  header->callback([&ctx, args] {
    ctx.action = [args] {
      std::cout << sif::formatHeader(sif::Image::open(args->image).header());
      return 0;
    };
  });
}

void registerList(CLI::App& sifCmd, Context& ctx, const SharedArgs& args) {
  auto* list = sifCmd.add_subcommand("list", "List data objects");
  list->add_option("file", args->image, "SIF image")->required();
  list->callback([&ctx, args] {
    ctx.action = [args] {
      std::cout << sif::formatList(sif::Image::open(args->image));
      return 0;
    };
  });
}

void registerInfo(CLI::App& sifCmd, Context& ctx, const SharedArgs& args) {
  auto* info = sifCmd.add_subcommand("info", "Display detailed information of a data object");
  info->add_option("id", args->id, "Object ID")->required();
  info->add_option("file", args->image, "SIF image")->required();
  info->callback([&ctx, args] {
    ctx.action = [args] {
      auto image = sif::Image::open(args->image);
      std::cout << sif::formatInfo(withContext(args->image, [&]() -> const sif::Descriptor& {
        return image.descriptorById(args->id);
      }));
      return 0;
    };
  });
}

void registerDump(CLI::App& sifCmd, Context& ctx, const SharedArgs& args) {
  auto* dump = sifCmd.add_subcommand("dump", "Write a data object's bytes to stdout");
  dump->add_option("id", args->id, "Object ID")->required();
  dump->add_option("file", args->image, "SIF image")->required();
  dump->callback([&ctx, args] {
    ctx.action = [args] {
      auto image = sif::Image::open(args->image);
      const auto& d = withContext(args->image, [&]() -> const sif::Descriptor& {
        return image.descriptorById(args->id);
      });
      std::cout.flush();
      image.copyObjectTo(d, STDOUT_FILENO);
      return 0;
    };
  });
}

void registerNew(CLI::App& sifCmd, Context& ctx, const SharedArgs& args) {
  auto* create = sifCmd.add_subcommand("new", "Create a new, empty SIF image");
  create->add_option("file", args->image, "SIF image to create")->required();
  create->callback([&ctx, args] {
    ctx.action = [args] {
      sif::CreateOptions options;
      options.id = sif::randomUuid();
      options.time = static_cast<std::int64_t>(std::time(nullptr));
      sif::createImage(args->image, options, {});
      return 0;
    };
  });
}

void registerAdd(CLI::App& sifCmd, Context& ctx, const SharedArgs& args) {
  auto* add = sifCmd.add_subcommand("add", "Add a data object to a SIF image");
  add->add_option("--datatype", args->dataType,
                  "Type of data: 1 Deffile, 2 EnvVar, 3 Labels, 4 Partition, 5 Signature, "
                  "6 GenericJSON, 7 Generic, 8 CryptoMessage, 9 SBOM, 10 OCI.RootIndex, 11 OCI.Blob")
      ->required();
  add->add_option("--parttype", args->partType,
                  "Partition type (with --datatype 4): 1 System, 2 PrimSys, 3 Data, 4 Overlay");
  add->add_option("--partfs", args->partFs,
                  "Partition filesystem (with --datatype 4): 1 Squashfs, 2 Ext3, 3 ImmuObj, 4 Raw");
  add->add_option("--partarch", args->partArch,
                  "Partition architecture (with --datatype 4): 1 386, 2 amd64, 3 arm, 4 arm64, "
                  "5 ppc64, 6 ppc64le, 7 mips, 8 mipsle, 9 mips64, 10 mips64le, 11 s390x, 12 riscv64");
  add->add_option("--signhash", args->signHash,
                  "Signature hash (with --datatype 5): 1 SHA256, 2 SHA384, 3 SHA512, 4 BLAKE2S_256, 5 BLAKE2B_256");
  add->add_option("--signentity", args->signEntity, "Signing entity fingerprint, hex (with --datatype 5)");
  add->add_option("--groupid", args->groupId, "Object group [default: 1]");
  add->add_option("--linkid,--link", args->linkId, "ID of the object this one links to [default: none]");
  add->add_option("--alignment", args->alignment,
                  "Alignment [default: 4096 for partitions, none otherwise]");
  add->add_option("--filename", args->name, "Object name [default: the input file's name]");
  add->add_option("file", args->image, "SIF image")->required();
  add->add_option("object", args->object, "File holding the object data")->required();
  add->callback([&ctx, args, add] { ctx.action = [args, add] { return runAdd(*args, *add); }; });
}

void registerDel(CLI::App& sifCmd, Context& ctx, const SharedArgs& args) {
  auto* del = sifCmd.add_subcommand("del", "Delete a data object");
  del->add_option("id", args->id, "Object ID")->required();
  del->add_option("file", args->image, "SIF image")->required();
  del->callback([&ctx, args] {
    ctx.action = [args] {
      auto image = sif::Image::open(args->image, true);
      sif::Editor editor(image);
      sif::DeleteOptions options;
      options.id = args->id;
      options.time = editor.defaultTime();
      withContext(args->image, [&] { editor.remove(options); });
      return 0;
    };
  });
}

void registerSetprim(CLI::App& sifCmd, Context& ctx, const SharedArgs& args) {
  auto* setprim = sifCmd.add_subcommand("setprim", "Make a system partition the primary one");
  setprim->add_option("id", args->id, "Object ID")->required();
  setprim->add_option("file", args->image, "SIF image")->required();
  setprim->callback([&ctx, args] {
    ctx.action = [args] {
      auto image = sif::Image::open(args->image, true);
      sif::Editor editor(image);
      withContext(args->image, [&] { editor.setPrimary(args->id, editor.defaultTime()); });
      return 0;
    };
  });
}

// `ctr sif chunks IMAGE`: the chunk table that `ctr exec --lazy https://HOST/IMAGE` reads
// beside the image (IMAGE.chunks): the ORAS config's table (`ctr push`) with the blob's digest.
void registerChunks(CLI::App& sifCmd, Context& ctx, const SharedArgs& args) {
  auto* chunks = sifCmd.add_subcommand(
      "chunks", "Write the image's chunk table to standard output, to be served as IMAGE.chunks beside it for ctr "
                "exec --lazy URL (ctr sif chunks IMAGE > IMAGE.chunks)");
  chunks->add_option("file", args->image, "SIF image")->required();
  chunks->callback([&ctx, args] {
    ctx.action = [args] {
      UniqueFd fd(::open(args->image.c_str(), O_RDONLY | O_CLOEXEC));
      if (!fd) throw sysError(args->image);
      (void)sif::Image::open(args->image);  // a SIF: what a lazy launch reads
      const auto [digest, table] = image::digestAndChunks(fd.get(), args->image);
      std::cout << image::urlChunkTable(digest, table) << '\n';
      return 0;
    };
  });
}

}  // namespace

void registerSif(CLI::App& app, Context& ctx) {
  auto* sifCmd = app.add_subcommand("sif", "Inspect and edit SIF images (as siftool)");
  sifCmd->require_subcommand(1);
  auto args = std::make_shared<SifArgs>();
  registerHeader(*sifCmd, ctx, args);
  registerList(*sifCmd, ctx, args);
  registerInfo(*sifCmd, ctx, args);
  registerDump(*sifCmd, ctx, args);
  registerNew(*sifCmd, ctx, args);
  registerAdd(*sifCmd, ctx, args);
  registerDel(*sifCmd, ctx, args);
  registerSetprim(*sifCmd, ctx, args);
  registerChunks(*sifCmd, ctx, args);
}

}  // namespace ctr::cli
