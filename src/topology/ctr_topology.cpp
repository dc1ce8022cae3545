// ctr-topology: the node's topology from hwloc as one JSON object on stdout, for
// `ctr check --host` (and through it the benchmark's host fingerprint). A program of its own
// so that ctr, which every MPI rank starts, never loads libhwloc (ctr/inventory.hpp).
// Memory sizes are left out on purpose: hwloc's NUMA sizes are wrong on VMs booted with
// deferred memory init; ctr takes MemTotal from /proc/meminfo.
#include <hwloc.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

namespace {

using nlohmann::json;

const char* osdevType(hwloc_obj_osdev_type_t type) {
  switch (type) {
    case HWLOC_OBJ_OSDEV_BLOCK: return "block";
    case HWLOC_OBJ_OSDEV_GPU: return "gpu";
    case HWLOC_OBJ_OSDEV_NETWORK: return "network";
    case HWLOC_OBJ_OSDEV_OPENFABRICS: return "openfabrics";
    case HWLOC_OBJ_OSDEV_DMA: return "dma";
    case HWLOC_OBJ_OSDEV_COPROC: return "coproc";
  }
  return "other";
}

std::string bitmapText(hwloc_const_bitmap_t set) {
  char* text = nullptr;
  if (hwloc_bitmap_list_asprintf(&text, set) < 0 || !text) return {};
  std::string out = text;
  std::free(text);
  return out;
}

}  // namespace

int main(int argc, char**) {
  if (argc > 1) {
    std::cerr << "usage: ctr-topology (prints the hwloc topology as JSON)\n";
    return 2;
  }
  hwloc_topology_t topo = nullptr;
  if (hwloc_topology_init(&topo) != 0) {
    std::cerr << "ctr-topology: hwloc_topology_init failed\n";
    return 1;
  }
  // PCI devices and OS devices (GPUs, NICs, HCAs) with their locality.
  hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (hwloc_topology_load(topo) != 0) {
    std::cerr << "ctr-topology: hwloc_topology_load failed\n";
    hwloc_topology_destroy(topo);
    return 1;
  }
  json out;
  const unsigned v = hwloc_get_api_version();
  out["hwloc_api"] = std::to_string(v >> 16) + "." + std::to_string((v >> 8) & 0xff) + "." + std::to_string(v & 0xff);
  out["packages"] = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
  out["numa_nodes"] = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  out["cores"] = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
  out["pus"] = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
  out["numa"] = json::array();
  for (hwloc_obj_t n = nullptr; (n = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, n));)
    out["numa"].push_back({{"os_index", n->os_index}, {"cpus", bitmapText(n->cpuset)}});
  out["os_devices"] = json::array();
  for (hwloc_obj_t d = nullptr; (d = hwloc_get_next_osdev(topo, d));) {
    json dev = {{"name", d->name ? d->name : ""}, {"type", osdevType(d->attr->osdev.type)}};
    json nodes = json::array();
    if (hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, d); anc && anc->nodeset) {
      for (hwloc_obj_t n = nullptr; (n = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, n));)
        if (hwloc_bitmap_intersects(n->nodeset, anc->nodeset)) nodes.push_back(n->os_index);
    }
    dev["numa_nodes"] = nodes;
    for (hwloc_obj_t p = d->parent; p; p = p->parent) {
      if (p->type == HWLOC_OBJ_PCI_DEVICE) {
        char bdf[32];
        std::snprintf(bdf, sizeof bdf, "%04x:%02x:%02x.%x", p->attr->pcidev.domain, p->attr->pcidev.bus,
                      p->attr->pcidev.dev, p->attr->pcidev.func);
        dev["pci"] = bdf;
        break;
      }
    }
    out["os_devices"].push_back(std::move(dev));
  }
  hwloc_topology_destroy(topo);
  std::cout << out.dump() << '\n';
  return 0;
}
