#include "tests/trace/pt_encode.h"

#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "recorder/elf/build_id.h"
#include "recorder/model/event_codec.h"
#include "recorder/symbolize/elf_symbols.h"
#include "store/store.h"
#include "tests/support/records.h"
#include "tests/support/run.h"

namespace flightrec::testing {
namespace {

pt_packet Packet(pt_packet_type type) {
  pt_packet p{};
  p.type = type;
  return p;
}

pt_packet IpPacket(pt_packet_type type, uint64_t ip) {
  pt_packet p = Packet(type);
  p.payload.ip.ipc = pt_ipc_sext_48;
  p.payload.ip.ip = ip;
  return p;
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "pt_encode: %s\n", what.c_str());
  std::abort();
}

}  // namespace

pt_packet PtPsb() { return Packet(ppt_psb); }
pt_packet PtPsbEnd() { return Packet(ppt_psbend); }
pt_packet PtMode64() {
  pt_packet p = Packet(ppt_mode);
  p.payload.mode.leaf = pt_mol_exec;
  p.payload.mode.bits.exec = pt_set_exec_mode(ptem_64bit);
  return p;
}
pt_packet PtTsc(uint64_t tsc) {
  pt_packet p = Packet(ppt_tsc);
  p.payload.tsc.tsc = tsc;
  return p;
}
pt_packet PtFup(uint64_t ip) { return IpPacket(ppt_fup, ip); }
pt_packet PtTipPge(uint64_t ip) { return IpPacket(ppt_tip_pge, ip); }
pt_packet PtTipPgdSuppressed() {
  pt_packet p = Packet(ppt_tip_pgd);
  p.payload.ip.ipc = pt_ipc_suppressed;
  return p;
}
pt_packet PtTnt(const std::vector<bool>& bits) {
  pt_packet p = Packet(ppt_tnt_8);
  p.payload.tnt.bit_size = static_cast<uint8_t>(bits.size());
  // The oldest outcome is the payload's most significant bit (libipt's
  // pt_packet_tnt, as the SDM's TNT packet orders them).
  for (bool b : bits) p.payload.tnt.payload = (p.payload.tnt.payload << 1) | (b ? 1 : 0);
  return p;
}

std::string EncodePt(const std::vector<pt_packet>& packets) {
  std::vector<uint8_t> buf(64 + packets.size() * 32);
  pt_config config;
  pt_config_init(&config);
  config.begin = buf.data();
  config.end = buf.data() + buf.size();
  pt_encoder* enc = pt_alloc_encoder(&config);
  if (enc == nullptr) Die("pt_alloc_encoder failed");
  size_t len = 0;
  for (const auto& p : packets) {
    pt_packet copy = p;
    int n = pt_enc_next(enc, &copy);
    if (n < 0) Die(std::string("pt_enc_next: ") + pt_errstr(pt_errcode(n)));
    len += static_cast<size_t>(n);
  }
  pt_free_encoder(enc);
  return std::string(reinterpret_cast<const char*>(buf.data()), len);
}

PtProgram LoadPtProgram() {
  PtProgram p;
  p.path = BuildPath("tests/programs/fr_pt_calls");
  RunResult nm = RunCommand({"/usr/bin/nm", "--defined-only", p.path});
  if (nm.exit_code != 0) Die("nm " + p.path + ": " + nm.err);
  std::istringstream in(nm.out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream l(line);
    std::string value, type, name;
    if (l >> value >> type >> name)
      p.addr[name] = PtProgram::kBase + std::stoull(value, nullptr, 16);
  }
  recorder::symbolize::SymTuples syms;
  recorder::symbolize::SegTuples segs;
  recorder::symbolize::ElfFacts facts;
  if (!recorder::symbolize::ReadElfSymbols(p.path, &syms, &segs, &facts)) Die("cannot read ELF");
  p.build_id = facts.build_id;
  const uint64_t main_vaddr = p.addr.at("main") - PtProgram::kBase;
  for (const auto& [offset, vaddr, filesz] : segs) {
    if (main_vaddr < vaddr || main_vaddr >= vaddr + filesz) continue;
    // As the loader maps it: page-aligned, file offset and address together.
    p.text_start = PtProgram::kBase + (vaddr & ~0xfffull);
    p.text_pgoff = offset & ~0xfffull;
    p.text_len = ((vaddr & 0xfff) + filesz + 0xfff) & ~0xfffull;
  }
  if (p.text_start == 0) Die("no segment holds main");
  return p;
}

std::string CallsTrace(const PtProgram& p, uint64_t tsc0, uint64_t tsc1) {
  return EncodePt({PtPsb(), PtMode64(), PtTsc(tsc0), PtFup(p.addr.at("main")), PtPsbEnd(),
                   // c -> b, b -> a, a -> main: returns to their call sites,
                   // compressed to one taken bit each.
                   PtTnt({true, true, true}), PtTsc(tsc1),
                   // The store at fr_pt_fault faults: the CPU leaves user
                   // space there, so a user-only trace stops at it.
                   PtFup(p.addr.at("fr_pt_fault")), PtTipPgdSuppressed()});
}

std::string WritePtRecord(const std::string& store_dir, const PtProgram& p, uint32_t pid,
                          const std::string& trace, const std::string& build_id,
                          const std::string& pmu) {
  using namespace recorder;
  EventEncoder enc;
  enc.Add(Event(CommEvent{1000, pid, pid, "fr_pt_calls", true}));
  MmapEvent m;
  m.time_ns = 1001;
  m.pid = m.tid = pid;
  m.start = p.text_start;
  m.len = p.text_len;
  m.pgoff = p.text_pgoff;
  m.prot = PROT_READ | PROT_EXEC;
  m.build_id = build_id.empty() ? p.build_id : build_id;
  m.filename = p.path;
  enc.Add(Event(m));
  AuxTrace t;
  t.pmu = pmu;
  t.pmu_type = 8;
  t.time_mult = 1;  // TSC ticks read as ns: times in the test are its TSC values
  AuxCpuTrace c;
  c.cpu = 1;
  c.pid = c.tid = pid;
  c.aux_size = 4096;
  c.aux_head = 3 * c.aux_size + trace.size();  // the area wrapped three times
  c.flags = kAuxFlagOverwrite;
  c.data = trace;
  t.cpus.push_back(c);
  auto store = store::Store::Open(store_dir, store::testing::TestOptions());
  if (!store.ok()) Die(store.status().ToString());
  auto rec = (*store)->BeginRecord("dump");
  if (!rec.ok()) Die(rec.status().ToString());
  for (const auto& [name, body] : {std::pair<std::string, std::string>{"events", enc.Take()},
                                   {"config", "{}"},
                                   {kSectionAuxTrace, EncodeAuxTrace(t)}}) {
    if (auto st = (*rec)->writer().AddSection(name, body); !st.ok()) Die(st.ToString());
  }
  auto row = (*store)->Commit(std::move(*rec), {{"pids", {pid}}, {"reason", "pt test"}});
  if (!row.ok()) Die(row.status().ToString());
  return row->id;
}

}  // namespace flightrec::testing
