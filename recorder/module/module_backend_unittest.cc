// Conversions from the module's records to the event stream (pure logic; the
// module itself is exercised in the QEMU guest, tests/vm).
#include "recorder/module/module_backend.h"

#include <gtest/gtest.h>

#include <cstring>

namespace flightrec::recorder::module {
namespace {

TEST(ModuleBackendTest, SidebandRecordsBecomeMmapExecAndTaskEvents) {
  flightrec_sideband r{};
  r.type = FLIGHTREC_SB_MMAP;
  r.time_ns = 5;
  r.pid = 10;
  r.tid = 11;
  r.start = 0x7f0000001000;
  r.len = 0x2000;
  r.pgoff = 0x1000;
  r.ino = 99;
  r.dev = (8u << 8) | 1u;  // new_encode_dev(MKDEV(8, 1))
  std::strcpy(r.path, "/usr/lib/libx.so");
  auto e = SidebandEvent(r);
  ASSERT_TRUE(e && std::holds_alternative<MmapEvent>(*e));
  const auto& m = std::get<MmapEvent>(*e);
  EXPECT_EQ(m.maj, 8u);
  EXPECT_EQ(m.min, 1u);
  EXPECT_EQ(m.start, 0x7f0000001000u);
  EXPECT_EQ(m.pgoff, 0x1000u);
  EXPECT_EQ(m.filename, "/usr/lib/libx.so");
  r.type = FLIGHTREC_SB_EXEC;
  std::strcpy(r.path, "/usr/bin/a-very-long-program-name");
  e = SidebandEvent(r);
  ASSERT_TRUE(e && std::holds_alternative<CommEvent>(*e));
  EXPECT_EQ(std::get<CommEvent>(*e).comm, "a-very-long-pro");  // TASK_COMM_LEN - 1
  EXPECT_TRUE(std::get<CommEvent>(*e).exec);
  r.type = FLIGHTREC_SB_EXIT;
  e = SidebandEvent(r);
  ASSERT_TRUE(e && std::holds_alternative<TaskEvent>(*e));
  EXPECT_TRUE(std::get<TaskEvent>(*e).exit);
  r.type = 77;  // unknown: skipped
  EXPECT_FALSE(SidebandEvent(r));
  // A path without its NUL is cut at the field, not read past it.
  r.type = FLIGHTREC_SB_MMAP;
  std::memset(r.path, 'a', sizeof(r.path));
  e = SidebandEvent(r);
  EXPECT_EQ(std::get<MmapEvent>(*e).filename.size(), sizeof(r.path));
}

TEST(ModuleBackendTest, SamplesCarryChainsLikePerfAndTheAuxStack) {
  flightrec_sample r{};
  r.time_ns = 100;
  r.cpu = 1;
  r.pid = 10;
  r.tid = 11;
  r.ip = 0xffffffff81000010;
  r.mode = FLIGHTREC_MODE_KERNEL;
  r.nr_kframes = 2;
  r.kframes[0] = 0xffffffff81000100;
  r.kframes[1] = 0xffffffff81000200;
  r.nr_uframes = 2;
  r.uframes[0] = 0x401000;
  r.uframes[1] = 0x402000;
  Sample s = SampleFromRecord(r, 1'000'000, nullptr, nullptr, 0);
  EXPECT_EQ(s.mode, CpuMode::kKernel);
  EXPECT_EQ(s.kernel_chain, (std::vector<uint64_t>{r.ip, 0xffffffff81000100, 0xffffffff81000200}));
  EXPECT_EQ(s.user_chain, (std::vector<uint64_t>{0x401000, 0x402000}));
  EXPECT_EQ(s.period, 1'000'000u);
  EXPECT_TRUE(s.user_stack.regs.empty());
  // A user sample with its AUX blob; counts past the arrays are clamped.
  r.mode = FLIGHTREC_MODE_USER;
  r.ip = 0x401000;
  r.nr_kframes = 0;
  r.nr_uframes = 1000;
  flightrec_aux aux{};
  aux.abi = 1;
  aux.regs[7] = 0x7ffc0000;  // PERF_REG_X86_SP
  uint8_t stack[16] = {1, 2, 3};
  s = SampleFromRecord(r, 1'000'000, &aux, stack, sizeof(stack));
  EXPECT_TRUE(s.kernel_chain.empty());
  EXPECT_EQ(s.user_chain.size(), static_cast<size_t>(FLIGHTREC_MAX_UFRAMES));
  EXPECT_EQ(s.user_stack.regs.size(), static_cast<size_t>(FLIGHTREC_NR_REGS));
  EXPECT_EQ(s.user_stack.regs[7], 0x7ffc0000u);
  EXPECT_EQ(s.user_stack.stack.size(), sizeof(stack));
  EXPECT_EQ(s.user_stack.dyn_size, sizeof(stack));
}

TEST(ModuleBackendTest, AnExecComesBeforeTheMappingsOfItsImage) {
  auto rec = [](uint32_t type, uint32_t pid, uint64_t t) {
    flightrec_sideband r{};
    r.type = type;
    r.pid = r.tid = pid;
    r.time_ns = t;
    std::strcpy(r.path, "/bin/x");
    return r;
  };
  // fork of 5 by 1, 5 maps its new image, then the module reports the exec.
  auto out = OrderSideband({rec(FLIGHTREC_SB_FORK, 5, 1), rec(FLIGHTREC_SB_MMAP, 5, 2),
                            rec(FLIGHTREC_SB_MMAP, 6, 3), rec(FLIGHTREC_SB_MMAP, 5, 4),
                            rec(FLIGHTREC_SB_EXEC, 5, 5)});
  ASSERT_EQ(out.size(), 5u);
  EXPECT_TRUE(std::holds_alternative<TaskEvent>(out[0]));
  ASSERT_TRUE(std::holds_alternative<CommEvent>(out[1]));
  EXPECT_TRUE(std::get<CommEvent>(out[1]).exec);
  EXPECT_EQ(std::get<MmapEvent>(out[2]).time_ns, 2u);
  EXPECT_EQ(std::get<MmapEvent>(out[3]).pid, 6u);
  EXPECT_EQ(std::get<MmapEvent>(out[4]).time_ns, 4u);
  // The image's mappings were drained before: the exec only renames.
  out = OrderSideband({rec(FLIGHTREC_SB_EXEC, 5, 5)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(std::get<CommEvent>(out[0]).exec);
  EXPECT_EQ(std::get<CommEvent>(out[0]).comm, "x");
}

TEST(ModuleBackendTest, MissingDeviceSaysWhatToDo) {
  auto b = ModuleBackend::Create("/nonexistent/flightrec");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("is flightrec.ko loaded?"), std::string::npos);
}

}  // namespace
}  // namespace flightrec::recorder::module
