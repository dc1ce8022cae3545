// --writable, and --overlay: directories stacked over the image as overlayfs layers (one writable, the
// others read-only), with Apptainer's layout and order. The host module looks at each path
// (host.overlayFiles); this decides the layers.
#include <algorithm>
#include <optional>
#include <vector>

#include "ctr/error.hpp"
#include "ctr/pathutil.hpp"
#include "plan_steps.hpp"

namespace ctr::launch {

OverlaySpec parseOverlaySpec(const std::string& spec, const std::string& cwd) {
  OverlaySpec arg;
  arg.spec = spec;
  std::string path = spec;
  for (const char* suffix : {":ro", ":rw"}) {
    if (path.size() > 3 && path.ends_with(suffix)) {
      arg.readOnly = std::string_view(suffix) == ":ro";
      path.resize(path.size() - 3);
      break;
    }
  }
  if (path.empty()) throw Error("bad --overlay '" + spec + "': no path").withStatus(1);
  // overlayfs takes its layers in one option string: ':' separates lower layers, ','
  // options, '\' escapes; a path with any of them would be another path there.
  if (path.find_first_of(":,\\") != std::string::npos)
    throw Error("bad --overlay '" + spec + "': a path with ':', ',' or '\\' cannot be an overlay layer (only :ro or :rw may follow it)")
        .withStatus(1);
  arg.path = normalizePath(path[0] == '/' ? path : joinPath(cwd, path));
  if (arg.path == "/") throw Error("bad --overlay '" + spec + "': not /").withStatus(1);
  return arg;
}

std::string_view toString(UnionDriver driver) {
  return driver == UnionDriver::Kernel ? "overlayfs" : "fuse-overlayfs";
}

namespace {

// How long a killed process of the container may sit in an uninterruptible wait before the
// launch's FUSE servers are taken to be stuck: far longer than any answer of a working
// fuse2fs (a write of its whole cache), short enough for a job's end (Slurm's KillWait is 30 s).
constexpr std::chrono::seconds kStuckServerGrace{10};

// A SIF's own ext3 overlay partition, as Apptainer stacks it: the layer --writable writes
// into, and otherwise read-only under every --overlay (unless one names the image itself).
std::optional<OverlayArg> embeddedOverlay(const LaunchPlan& plan, const LaunchOptions& options,
                                          const std::vector<OverlayArg>& args) {
  if (plan.image.kind != image::ImageKind::Sif || plan.image.overlaySize == 0) return std::nullopt;
  OverlayArg arg;
  arg.path = plan.image.path.string();
  for (const auto& given : args)
    if (given.kind == OverlayKind::Ext3 && given.ext3Offset == plan.image.overlayOffset &&
        (given.path == arg.path || given.path == options.image))
      return std::nullopt;  // --overlay IMAGE: that spec says how
  arg.spec = arg.path + " (its overlay partition)";
  arg.readOnly = !options.writable;
  arg.kind = OverlayKind::Ext3;
  arg.ext3Offset = plan.image.overlayOffset;
  arg.ext3Size = plan.image.overlaySize;
  return arg;
}

// The layers asked for, with a SIF's own overlay partition lowest; --writable of an image
// that cannot take changes is refused here.
std::vector<OverlayArg> overlayArgs(LaunchPlan& plan, const LaunchOptions& options, const host::HostFacts& host) {
  std::vector<OverlayArg> args;
  for (const auto& spec : options.overlays) {
    const auto file = host.overlayFiles.find(spec.path);
    if (file == host.overlayFiles.end()) throw Error("--overlay " + spec.spec + ": the path was not looked at");
    args.push_back({spec, file->second});
  }
  if (auto own = embeddedOverlay(plan, options, args)) {
    if (options.command == Command::Instance && own->readOnly)
      plan.warnings.push_back(plan.image.path.string() + "'s overlay partition is not stacked: instance start takes no "
                              "ext3 layer yet (its FUSE servers end with a launch's process)");
    else
      args.push_back(std::move(*own));  // the lowest layer
  } else if (options.writable) {
    if (plan.image.kind != image::ImageKind::Directory)
      throw Error("--writable needs a sandbox directory image (ctr build --sandbox DIR IMAGE makes one) or a SIF with "
                  "an overlay partition (ctr overlay create --size MiB IMAGE.sif adds one); " +
                  plan.image.path.string() + " is a " + image::toString(plan.image.kind) +
                  " image: --overlay DIR keeps changes over it, --writable-tmpfs until the container ends");
  }
  return args;
}

struct LayerStack {
  RootOverlay overlay;                  // the writable layer on top, once there is one
  std::vector<OverlayLayer> readOnly;  // go under it, in the order given
};

void refuseRepeat(const LayerStack& stack, const OverlayArg& arg) {
  const auto same = [&](const OverlayLayer& l) { return l.path == arg.path; };
  if (std::any_of(stack.overlay.layers.begin(), stack.overlay.layers.end(), same) ||
      std::any_of(stack.readOnly.begin(), stack.readOnly.end(), same))
    throw Error("--overlay " + arg.path + " is given twice").withStatus(1);
}

// Read-only whatever the spec says (as Apptainer): the holder's mount of the image.
OverlayLayer imageLayer(const OverlayArg& arg, const std::vector<DatasetImage>& datasets) {
  const auto dataset = std::find_if(datasets.begin(), datasets.end(), [&](const DatasetImage& d) {
    return arg.image && d.source == arg.image->path.string();
  });
  if (dataset == datasets.end()) throw Error("--overlay " + arg.spec + ": the image was not looked at").withStatus(1);
  OverlayLayer layer;
  layer.path = arg.path;
  layer.dir = dataset->mountDir;
  layer.image = true;
  return layer;
}

void stackWritable(RootOverlay& overlay, OverlayLayer layer) {
  if (const OverlayLayer* other = overlay.writable())
    throw Error("--overlay " + other->path + " and " + layer.path + " are both writable: at most one is (give " +
                "the others :ro)")
        .withStatus(1);
  overlay.layers.insert(overlay.layers.begin(), std::move(layer));
}

// A directory or an ext3 image, read-only or writable.
void stackLayer(LayerStack& stack, const OverlayArg& arg) {
  OverlayLayer layer;
  layer.path = arg.path;
  layer.writable = !arg.readOnly;
  if (arg.kind == OverlayKind::Ext3) {
    layer.ext3 = OverlayLayer::Ext3{arg.ext3Offset, arg.ext3Size};
    stack.overlay.driver = UnionDriver::FuseOverlayfs;
    stack.overlay.stuckServerGrace = kStuckServerGrace;
  }
  if (layer.ext3 && layer.writable) {
    layer.dir = "upper";
    layer.workDir = "work";
    stackWritable(stack.overlay, std::move(layer));
  } else if (layer.ext3) {
    layer.dir = "upper";
    stack.readOnly.push_back(std::move(layer));
  } else if (layer.writable) {
    layer.dir = joinPath(arg.path, "upper");
    layer.workDir = joinPath(arg.path, "work");
    layer.create = true;
    stackWritable(stack.overlay, std::move(layer));
  } else {
    layer.dir = arg.hasUpperDir ? joinPath(arg.path, "upper") : arg.path;
    stack.readOnly.push_back(std::move(layer));
  }
}

RootOverlay stackLayers(const std::vector<OverlayArg>& args, const std::vector<DatasetImage>& datasets) {
  LayerStack stack;
  for (const auto& arg : args) {
    refuseRepeat(stack, arg);
    switch (arg.kind) {
      case OverlayKind::Directory: break;
      case OverlayKind::Missing:
        if (arg.readOnly) throw Error("--overlay " + arg.spec + ": no such directory").withStatus(1);
        break;  // a writable one is created
      case OverlayKind::Squashfs:
      case OverlayKind::Sif: stack.readOnly.push_back(imageLayer(arg, datasets)); continue;
      case OverlayKind::Ext3: break;  // read-only or writable, as given
      case OverlayKind::Other: throw Error("--overlay " + arg.spec + ": not a directory").withStatus(1);
    }
    stackLayer(stack, arg);
  }
  for (auto& layer : stack.readOnly) stack.overlay.layers.push_back(std::move(layer));
  return std::move(stack.overlay);
}

}  // namespace

void planOverlay(LaunchPlan& plan, const LaunchOptions& options, const host::HostFacts& host) {
  std::vector<OverlayArg> args = overlayArgs(plan, options, host);
  if (options.writable) {
    if (options.writableTmpfs || !options.overlays.empty())
      throw Error("--writable cannot be used with --writable-tmpfs or --overlay: the image itself takes the changes");
    if (plan.image.kind == image::ImageKind::Directory) {
      plan.rootMode = RootMode::Writable;
      return;
    }
  }
  if (args.size() > kMaxOverlayLayers)
    throw Error("--overlay given " + std::to_string(options.overlays.size()) + " times: at most " +
                std::to_string(kMaxOverlayLayers) + " layers")
        .withStatus(1);
  RootOverlay overlay = stackLayers(args, plan.datasets);
  if (options.writableTmpfs) {
    if (const OverlayLayer* writable = overlay.writable())
      plan.warnings.push_back("--writable-tmpfs is not used: --overlay " + writable->path + " is the writable layer");
    else
      overlay.tmpfsUpper = true;
  }
  if (!overlay.layers.empty() || overlay.tmpfsUpper) plan.rootMode = RootMode::Overlay;
  if (overlay.hasExt3() && options.command == Command::Instance)
    throw Error("--overlay with an ext3 image is not supported by instance start yet (its FUSE servers end with "
                "a launch's process); use a directory: --overlay DIR")
        .withStatus(1);
  plan.overlay = std::move(overlay);
}

}  // namespace ctr::launch
