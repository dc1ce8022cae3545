#include "ctr/device_filter.hpp"

#include <linux/bpf.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "ctr/error.hpp"
#include "ctr/fd.hpp"

namespace ctr::runtime {

namespace {

// The eBPF instructions the program needs, spelled out (linux/bpf.h has the opcodes only).
bpf_insn instruction(unsigned code, unsigned dst, unsigned src, std::int16_t offset, std::int32_t imm) {
  bpf_insn insn{};
  insn.code = static_cast<std::uint8_t>(code);
  insn.dst_reg = dst & 0xfu;
  insn.src_reg = src & 0xfu;
  insn.off = offset;
  insn.imm = imm;
  return insn;
}
bpf_insn loadWord(unsigned dst, std::size_t offset) {
  return instruction(BPF_LDX | BPF_W | BPF_MEM, dst, BPF_REG_1, static_cast<std::int16_t>(offset), 0);
}
bpf_insn andImmediate(unsigned dst, std::int32_t imm) { return instruction(BPF_ALU64 | BPF_AND | BPF_K, dst, 0, 0, imm); }
bpf_insn jumpIfNotEqual(unsigned reg, std::int32_t imm, std::int16_t skip) {
  return instruction(BPF_JMP | BPF_JNE | BPF_K, reg, 0, skip, imm);
}
bpf_insn moveImmediate(unsigned dst, std::int32_t imm) { return instruction(BPF_ALU64 | BPF_MOV | BPF_K, dst, 0, 0, imm); }
bpf_insn exitProgram() { return instruction(BPF_JMP | BPF_EXIT, 0, 0, 0, 0); }

long bpf(int command, bpf_attr& attr) { return ::syscall(__NR_bpf, command, &attr, sizeof attr); }

}  // namespace

void attachDeviceDenyFilter(int cgroupDirFd, const std::vector<limits::DeviceRule>& deny) {
  // struct bpf_cgroup_dev_ctx: access_type (type in the low 16 bits, access in the high),
  // major, minor. r2 = type, r3 = major, r4 = minor; each rule returns 0 (deny) on a match.
  std::vector<bpf_insn> program = {
      loadWord(BPF_REG_2, offsetof(bpf_cgroup_dev_ctx, access_type)),
      andImmediate(BPF_REG_2, 0xffff),
      loadWord(BPF_REG_3, offsetof(bpf_cgroup_dev_ctx, major)),
      loadWord(BPF_REG_4, offsetof(bpf_cgroup_dev_ctx, minor)),
  };
  for (const auto& rule : deny) {
    const std::int32_t type = rule.type == 'b' ? BPF_DEVCG_DEV_BLOCK : BPF_DEVCG_DEV_CHAR;
    program.push_back(jumpIfNotEqual(BPF_REG_2, type, 4));
    program.push_back(jumpIfNotEqual(BPF_REG_3, static_cast<std::int32_t>(rule.major), 3));
    program.push_back(jumpIfNotEqual(BPF_REG_4, static_cast<std::int32_t>(rule.minor), 2));
    program.push_back(moveImmediate(BPF_REG_0, 0));
    program.push_back(exitProgram());
  }
  program.push_back(moveImmediate(BPF_REG_0, 1));
  program.push_back(exitProgram());

  static constexpr char kLicense[] = "Apache-2.0";
  std::array<char, 4096> log{};
  bpf_attr load{};
  load.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
  load.insns = reinterpret_cast<std::uintptr_t>(program.data());
  load.insn_cnt = static_cast<std::uint32_t>(program.size());
  load.license = reinterpret_cast<std::uintptr_t>(kLicense);
  load.log_buf = reinterpret_cast<std::uintptr_t>(log.data());
  load.log_size = log.size();
  load.log_level = 1;
  UniqueFd prog(static_cast<int>(bpf(BPF_PROG_LOAD, load)));
  if (!prog) {
    const int err = errno;
    std::string verifier(log.data());
    while (!verifier.empty() && (verifier.back() == '\n' || verifier.back() == ' ')) verifier.pop_back();
    if (auto nl = verifier.rfind('\n'); nl != std::string::npos) verifier = verifier.substr(nl + 1);
    throw Error("cgroup v2: loading the device filter (BPF) failed: " + std::string(std::strerror(err)) +
                (verifier.empty() ? "" : " (verifier: " + verifier + ")"));
  }
  bpf_attr attach{};
  attach.target_fd = static_cast<std::uint32_t>(cgroupDirFd);
  attach.attach_bpf_fd = static_cast<std::uint32_t>(prog.get());
  attach.attach_type = BPF_CGROUP_DEVICE;
  attach.attach_flags = BPF_F_ALLOW_MULTI;
  if (bpf(BPF_PROG_ATTACH, attach) != 0) throw sysError("cgroup v2: attaching the device filter (BPF)");
}

}  // namespace ctr::runtime
