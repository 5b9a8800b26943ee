// A kernel panic's region (written byte by byte per the uapi, as flightrec.ko's
// panic notifier lays it out) → StoreHeldRegion (recorderd's claim after
// PANIC_READ) → a record of kind `panic` → the real `recorder` binary: crash
// list/info, report, script, timeline and export (go tool pprof reads it).
// The user samples point into fr_spin's spin_a, a real binary on disk, so
// attribution by file identity + build-id is exercised for real; kernel
// frames use a synthetic kallsyms shifted by a known KASLR delta.
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "recorder/daemon/elf_symbol.h"
#include "recorder/daemon/panic_record.h"
#include "recorder/module/panic_region_builder.h"
#include "store/store.h"
#include "tests/support/run.h"

namespace flightrec {
namespace {

namespace fs = std::filesystem;
using recorder::module::KernelEnv;
using recorder::module::PanicClaim;
using recorder::module::testing::PanicRegionBuilder;
using testing::BuildPath;
using testing::RunCommand;

// This boot's kernel, as the test pretends it is: symbols at their
// addresses now; the crashed boot had them kDelta higher (KASLR).
constexpr uint64_t kDelta = 0x2400000;
constexpr uint64_t kPanicNow = 0xffffffff81100000;
constexpr uint64_t kSysrqNow = 0xffffffff81500000;
constexpr uint64_t kHandleNow = 0xffffffff81510000;
constexpr uint64_t kModNow = 0xffffffffc0200000;  // flightrec.ko's base now
constexpr uint64_t kModCrashed = 0xffffffffc0a00000;

KernelEnv TestKernel(const std::string& release) {
  KernelEnv k;
  k.release = release;
  k.kallsyms = fmt::format(
      "ffffffff81000000 T _stext\n{:016x} T panic\n{:016x} T sysrq_handle_crash\n"
      "{:016x} T __handle_sysrq\nffffffff81800000 T _etext\n{:016x} t fr_panic_notify\t"
      "[flightrec]\n",
      kPanicNow, kSysrqNow, kHandleNow, kModNow + 0x100);
  k.modules = fmt::format("flightrec 65536 0 - Live 0x{:x}\n", kModNow);
  return k;
}

class PanicRecordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("panic_record_test." + std::to_string(getpid()) + "." +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "store");
    spin_ = fs::canonical(BuildPath("tests/programs/fr_spin")).string();
    auto a = recorder::ResolveUprobeTarget(spin_ + ":spin_a");
    auto m = recorder::ResolveUprobeTarget(spin_ + ":main");
    ASSERT_TRUE(a.ok() && m.ok()) << a.status().message();
    spin_a_ = a->file_offset;
    main_ = m->file_offset;
    ASSERT_EQ(stat(spin_.c_str(), &st_), 0);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // cpu 0: fr_spin in spin_a for the 2 s before the panic (called from
  // main); cpu 1 (panicking): idle, then the sysrq crash path.
  PanicRegionBuilder Region() {
    PanicRegionBuilder b(512 * 1024, 2);
    b.SetMessage("sysrq triggered crash\n");
    b.header().kernel_anchor = kPanicNow + kDelta;
    b.header().panic_cpu = 1;
    b.header().panic_time_ns = kPanic;
    b.header().mono_to_real_ns = 1'700'000'000'000'000'000 - 1'000'000'000'000;
    b.cpu(1).flags |= FLIGHTREC_PANIC_CPU_PANICKING;
    b.cpu(0).overwritten = 500;
    const uint64_t base = 0x555555554000;
    // new_encode_dev() (include/linux/kdev_t.h), as the module stores st_dev.
    const uint32_t dev = (minor(st_.st_dev) & 0xff) | (major(st_.st_dev) << 8) |
                         ((minor(st_.st_dev) & ~0xffu) << 12);
    flightrec_sideband exec{};
    exec.type = FLIGHTREC_SB_EXEC;
    exec.time_ns = kPanic - 3'000'000'001;
    exec.pid = exec.tid = 4242;
    exec.ino = st_.st_ino;
    std::strncpy(exec.path, spin_.c_str(), sizeof(exec.path) - 1);
    b.AddSideband(exec);
    b.AddMmap(kPanic - 3'000'000'000, 4242, base, (st_.st_size + 4095) & ~4095ll, 0, dev,
              st_.st_ino, spin_);
    for (uint64_t t = kPanic - 2'000'000'000; t < kPanic; t += 10'000'000) {
      b.AddSample(0, t, 4242, 4242, base + spin_a_ + 0x10, false, {},
                  {base + spin_a_ + 0x10, base + main_ + 0x20});
    }
    for (uint64_t t = kPanic - 500'000'000; t < kPanic - 20'000'000; t += 10'000'000) {
      b.AddSample(1, t, 0, 0, 0xffffffff81000100 + kDelta, true, {}, {});
    }
    // The last sample: in the sysrq crash path, 2 ms before the panic.
    b.AddSample(1, kPanic - 2'000'000, 1, 1, kSysrqNow + kDelta + 0x12, true,
                {kHandleNow + kDelta + 0x40, kModCrashed + 0x120}, {});
    b.AddModule("flightrec", kModCrashed, 0x10000);
    // The panic record (kprobe at panic() entry): panic()'s callers.
    b.SetPanicRecord(1, kPanic, 1, kPanicNow + kDelta,
                     {kSysrqNow + kDelta + 0x12, kHandleNow + kDelta + 0x40, kModCrashed + 0x120},
                     {});
    return b;
  }

  // recorderd's claim after PANIC_READ, into the test's store.
  PanicClaim Store(const std::vector<uint8_t>& bytes, const KernelEnv& env, bool* released) {
    auto store = store::Store::Open((dir_ / "store").string());
    EXPECT_TRUE(store.ok()) << store.status().message();
    return recorder::module::StoreHeldRegion(
        bytes, "at 0x30000000 (4 MiB)", [&] { return env; },
        [&](recorder::module::PanicDump& d) -> StatusOr<std::string> {
          ASSIGN_OR_RETURN(auto r, recorder::WritePanicRecord(**store, d));
          return r.row.id;
        },
        [&] {
          *released = true;
          return std::string();
        });
  }

  testing::RunResult Cli(std::vector<std::string> args) {
    args.insert(args.begin(),
                {BuildPath("recorder/cli/recorder"), "--store", (dir_ / "store").string()});
    return RunCommand(args);
  }

  static constexpr uint64_t kPanic = 100'000'000'000;
  fs::path dir_;
  std::string spin_;
  uint64_t spin_a_ = 0, main_ = 0;
  struct stat st_ {};
};

TEST_F(PanicRecordTest, PanicBecomesARecordThatEveryQueryReads) {
  bool released = false;
  auto claim = Store(Region().Build(), TestKernel("6.1.0-56-amd64"), &released);
  ASSERT_EQ(claim.outcome, PanicClaim::Outcome::kStored) << claim.message;
  EXPECT_TRUE(released);
  EXPECT_NE(claim.message.find("from boot 10111213-1415-1617-1819-1a1b1c1d1e1f"),
            std::string::npos);
  const std::string id = claim.record_id;

  // crash list: the panic with its kind, text and JSON.
  auto list = Cli({"crash", "list"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find("KIND"), std::string::npos);
  EXPECT_NE(list.out.find(id + "  panic"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("sysrq triggered crash"), std::string::npos);
  auto lj = Cli({"crash", "list", "--json"});
  ASSERT_EQ(lj.exit_code, 0) << lj.err;
  auto rows = nlohmann::json::parse(lj.out);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["kind"], "panic");
  EXPECT_EQ(rows[0]["panic"]["boot_id"], "10111213-1415-1617-1819-1a1b1c1d1e1f");

  // crash info --json: message, the panicking CPU's last stack (kernel
  // frames named through the KASLR delta and the crashed module table), and
  // cpu 0's last second owned by spin_a in fr_spin.
  auto info = Cli({"crash", "info", id, "--json"});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  auto ij = nlohmann::json::parse(info.out);
  EXPECT_EQ(ij["kind"], "panic");
  EXPECT_EQ(ij["panic"]["message"], "sysrq triggered crash\n");
  EXPECT_EQ(ij["panic"]["kernel_frames"], "resolved");
  EXPECT_EQ(ij["panic"]["kaslr_delta"], static_cast<int64_t>(kDelta));
  EXPECT_EQ(ij["panic"]["panic_time_ns"], 1'700'000'000'000'000'000 - 900'000'000'000);
  // The newest stack is the panic record (panic() and its callers); the
  // timer's last sample before it, 2 ms earlier, is in the sysrq path too.
  auto stacks = ij["panicking_cpu"]["last_samples"];
  ASSERT_EQ(stacks.size(), 3u) << stacks.dump();
  auto last = stacks.back();
  EXPECT_EQ(last["panic_record"], true);
  EXPECT_EQ(last["before_panic_ns"], 0);
  EXPECT_EQ(ij["panicking_cpu"]["cpu"], 1u);
  EXPECT_EQ(ij["panicking_cpu"]["last_timer_sample_before_panic_ns"], 2'000'000);
  ASSERT_GE(last["frames"].size(), 4u) << last.dump();
  EXPECT_EQ(last["frames"][0].get<std::string>().rfind("panic", 0), 0u) << last.dump();
  EXPECT_EQ(last["frames"][1].get<std::string>().rfind("sysrq_handle_crash", 0), 0u) << last.dump();
  EXPECT_EQ(last["frames"][2].get<std::string>().rfind("__handle_sysrq", 0), 0u);
  EXPECT_NE(last["frames"][3].get<std::string>().find("fr_panic_notify"), std::string::npos)
      << last["frames"][3];
  auto timer = stacks[1];
  EXPECT_EQ(timer["panic_record"], false);
  EXPECT_EQ(timer["before_panic_ns"], 2'000'000);
  EXPECT_EQ(timer["frames"][0].get<std::string>().rfind("sysrq_handle_crash", 0), 0u);
  const auto& cpus = ij["cpus"];
  ASSERT_EQ(cpus.size(), 2u);
  EXPECT_EQ(cpus[0]["last_second"]["samples"], 100u);
  EXPECT_EQ(cpus[0]["last_second"]["top"][0]["function"], "spin_a (" + spin_ + ")");
  EXPECT_EQ(cpus[0]["last_second"]["top"][0]["pct"], 100.0);
  EXPECT_EQ(ij["panic"]["cpus"][0]["overwritten"], 500u);
  EXPECT_EQ(ij["panic"]["cpus"][0]["held"], 200u);
  // The region's counters add up: written = overwritten + not copied + held.
  EXPECT_EQ(ij["panic"]["cpus"][0]["written"], 700u);
  EXPECT_EQ(ij["panic"]["cpus"][0]["not_copied"], 0u);

  // Text form: the message and the stack, escaped; the timeline lanes.
  auto text = Cli({"crash", "info", id});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("Message: sysrq triggered crash"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("#1  sysrq_handle_crash"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("the panic record (at panic())"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("cpu 1   |"), std::string::npos) << text.out;

  // report: spin_a first, attributed to fr_spin by file identity.
  auto rep = Cli({"report", id, "--json"});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  auto rj = nlohmann::json::parse(rep.out);
  ASSERT_FALSE(rj["rows"].empty());
  EXPECT_EQ(rj["rows"][0]["key"], "spin_a");
  EXPECT_EQ(rj["rows"][0]["dso"], spin_);
  EXPECT_EQ(rj["loss"]["unaccounted"], 0);
  EXPECT_EQ(rj["loss"]["overwritten"], 500u);
  // script and timeline read it like any record.
  auto script = Cli({"script", id});
  ASSERT_EQ(script.exit_code, 0) << script.err;
  EXPECT_NE(script.out.find("spin_a"), std::string::npos);
  EXPECT_NE(script.out.find("sysrq_handle_crash"), std::string::npos);
  auto tl = Cli({"timeline", id, "--by", "comm"});
  ASSERT_EQ(tl.exit_code, 0) << tl.err;
  EXPECT_NE(tl.out.find("fr_spin"), std::string::npos) << tl.out;  // its exec, from the region
  // export: go tool pprof reads the profile and puts spin_a on top.
  const std::string pb = (dir_ / "panic.pb.gz").string();
  auto ex = Cli({"export", id, "--format", "pprof", "-o", pb});
  ASSERT_EQ(ex.exit_code, 0) << ex.err;
  auto top = RunCommand({"/usr/bin/go", "tool", "pprof", "-top", "-nodecount=5", pb},
                        {"HOME=" + dir_.string(), "GOCACHE=" + (dir_ / "gocache").string(),
                         "PPROF_TMPDIR=" + dir_.string()});
  ASSERT_EQ(top.exit_code, 0) << top.err;
  const size_t table = top.out.find("flat%");
  ASSERT_NE(table, std::string::npos) << top.out;
  const size_t first_row = top.out.find('\n', table) + 1;
  EXPECT_NE(top.out.substr(first_row, top.out.find('\n', first_row) - first_row).find("spin_a"),
            std::string::npos)
      << top.out;
}

TEST_F(PanicRecordTest, OtherReleaseKeepsKernelFramesUnresolvedAndSaysWhy) {
  bool released = false;
  auto claim = Store(Region().Build(), TestKernel("6.12.0-other"), &released);
  ASSERT_EQ(claim.outcome, PanicClaim::Outcome::kStored) << claim.message;
  auto info = Cli({"crash", "info", claim.record_id, "--json"});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  auto ij = nlohmann::json::parse(info.out);
  EXPECT_EQ(ij["panic"]["kernel_frames"], "unresolved");
  EXPECT_EQ(ij["panic"]["kernel_frames_note"],
            "kernel release 6.1.0-56-amd64 differs from running 6.12.0-other: kernel frames "
            "unresolved");
  auto frames = ij["panicking_cpu"]["last_samples"].back()["frames"];
  ASSERT_GE(frames.size(), 4u);
  // Offsets in the kernel image mapping; module frames from the region's table.
  EXPECT_EQ(frames[1],
            fmt::format("[kernel]+0x{:x}", kSysrqNow + kDelta + 0x12 - 0xffffffff80000000ull));
  EXPECT_EQ(frames[3], "[flightrec]+0x120");
  // User frames do not depend on the kernel: still spin_a.
  EXPECT_EQ(ij["cpus"][0]["last_second"]["top"][0]["function"], "spin_a (" + spin_ + ")");
  auto text = Cli({"crash", "info", claim.record_id});
  EXPECT_NE(text.out.find("differs from running 6.12.0-other"), std::string::npos) << text.out;
}

TEST_F(PanicRecordTest, DamagedPartsAndLostPanicsAreNamedInTheRecord) {
  auto b = Region();
  b.header().panics_lost = 2;
  auto bytes = b.Build();
  const auto c1 = PanicRegionBuilder::CpuOf(bytes, 1);
  bytes[c1.data_off + 30] ^= 0x10;
  bool released = false;
  auto claim = Store(bytes, TestKernel("6.1.0-56-amd64"), &released);
  ASSERT_EQ(claim.outcome, PanicClaim::Outcome::kStored) << claim.message;
  EXPECT_NE(claim.message.find("2 damaged parts"), std::string::npos) << claim.message;
  auto ij = nlohmann::json::parse(Cli({"crash", "info", claim.record_id, "--json"}).out);
  EXPECT_EQ(ij["panic"]["panics_lost"], 2u);
  auto damaged = ij["panic"]["damaged"];
  ASSERT_EQ(damaged.size(), 2u) << damaged.dump();
  EXPECT_EQ(damaged[0], "cpu 1: data checksum mismatch: its history is dropped");
  EXPECT_EQ(damaged[1],
            "2 later panics found this region unclaimed: their history was not recorded");
  // cpu 0's history is whole; cpu 1 keeps only its panic record (in the
  // header area, checked on its own).
  ASSERT_EQ(ij["cpus"].size(), 2u);
  EXPECT_EQ(ij["cpus"][0]["samples"], 200u);
  EXPECT_EQ(ij["cpus"][1]["samples"], 1u);
  auto text = Cli({"crash", "info", claim.record_id});
  EXPECT_NE(text.out.find("Damaged: cpu 1: data checksum mismatch"), std::string::npos);
  EXPECT_NE(text.out.find("Panics lost: 2"), std::string::npos);
}

// The panic message and release come from the crashed kernel's memory: they
// reach the terminal escaped, and JSON keeps bytes that are not UTF-8.
TEST_F(PanicRecordTest, HostileMessageIsEscapedEverywhere) {
  auto b = Region();
  b.SetMessage("boom\x1b]0;owned\x07\r\nFAKE: line \xff\xfe");
  b.SetRelease("6.1.0-56-amd64");
  bool released = false;
  auto claim = Store(b.Build(), TestKernel("6.1.0-56-amd64"), &released);
  ASSERT_EQ(claim.outcome, PanicClaim::Outcome::kStored) << claim.message;
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"crash", "list"}, {"crash", "info", claim.record_id}}) {
    auto r = Cli(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.find_first_of("\x1b\x07\r"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("\nFAKE"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("boom\\x1b]0;owned\\x07\\r\\nFAKE"), std::string::npos) << r.out;
  }
  auto j = Cli({"crash", "info", claim.record_id, "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  auto ij = nlohmann::json::parse(j.out);
  EXPECT_EQ(ij["panic"]["message_hex"].get<std::string>().substr(0, 8), "626f6f6d");  // "boom"
}

TEST_F(PanicRecordTest, TruncatedRegionStoresWhatWasRead) {
  auto bytes = Region().Build();
  const auto c1 = PanicRegionBuilder::CpuOf(bytes, 1);
  bytes.resize(c1.data_off + 100);
  bool released = false;
  auto claim = Store(bytes, TestKernel("6.1.0-56-amd64"), &released);
  ASSERT_EQ(claim.outcome, PanicClaim::Outcome::kStored) << claim.message;
  auto ij = nlohmann::json::parse(Cli({"crash", "info", claim.record_id, "--json"}).out);
  EXPECT_EQ(ij["samples"], 201u);  // cpu 0's and the panic record
  EXPECT_NE(ij["panic"]["damaged"].dump().find("region truncated"), std::string::npos);
}

TEST_F(PanicRecordTest, ColdAndCorruptRegionsStoreNothing) {
  bool released = false;
  std::vector<uint8_t> cold(64 * 1024, 0);
  auto claim = Store(cold, TestKernel("6.1.0-56-amd64"), &released);
  EXPECT_EQ(claim.outcome, PanicClaim::Outcome::kRefused);
  EXPECT_NE(claim.message.find("no magic"), std::string::npos) << claim.message;
  EXPECT_TRUE(released);
  auto bad = Region().Build();
  bad[offsetof(flightrec_panic_header, panic_time_ns)] ^= 1;
  released = false;
  claim = Store(bad, TestKernel("6.1.0-56-amd64"), &released);
  EXPECT_EQ(claim.outcome, PanicClaim::Outcome::kRefused);
  EXPECT_NE(claim.message.find("header checksum mismatch"), std::string::npos) << claim.message;
  EXPECT_TRUE(released);
  // Another version: kept (not released) for a recorder that reads it.
  auto other = Region().Build();
  auto h = PanicRegionBuilder::HeaderOf(other);
  h.version = 9;
  PanicRegionBuilder::Reseal(&other, h);
  released = false;
  claim = Store(other, TestKernel("6.1.0-56-amd64"), &released);
  EXPECT_EQ(claim.outcome, PanicClaim::Outcome::kRefused);
  EXPECT_FALSE(released);
  auto list = Cli({"crash", "list", "--json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_EQ(nlohmann::json::parse(list.out).size(), 0u);
}

}  // namespace
}  // namespace flightrec
