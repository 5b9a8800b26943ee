#include "recorder/model/event_codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>

#include <fmt/format.h>

namespace flightrec::recorder {
namespace {

std::vector<Event> SomeEvents() {
  Sample s;
  s.time_ns = 1'000'000'000;
  s.cpu = 1;
  s.pid = 42;
  s.tid = 43;
  s.mode = CpuMode::kUser;
  s.ip = 0x55550000'1234;
  s.period = 1'000'000;
  s.kernel_chain = {0xffffffff81000000, 0xffffffff81000100};
  s.user_chain = {0x55550000'1234, 0x55550000'1000, 0x7f0000001000};
  s.user_stack.regs_mask = 0x3;
  s.user_stack.regs = {7, 0x7ffc0000};
  s.user_stack.stack = {1, 2, 3, 4};
  s.user_stack.dyn_size = 3;
  MmapEvent m;
  m.time_ns = 999'000'000;  // earlier than the sample: negative delta
  m.pid = 42;
  m.tid = 42;
  m.start = 0x7f0000000000;
  m.len = 0x21000;
  m.pgoff = 0x1000;
  m.maj = 8;
  m.min = 1;
  m.ino = 123456;
  m.prot = 5;
  m.flags = 2;
  m.build_id = std::string("\x01\x02\xff", 3);
  m.filename = "/usr/lib/libfoo.so";
  CommEvent c{1'000'000'500, 42, 42, "spin", true};
  TaskEvent t{1'000'000'600, 44, 42, 44, 42, false};
  LostEvent l{1'000'000'700, 0, LossCause::kPaused, 17};
  return {s, m, c, t, l};
}

TEST(EventCodecTest, RoundTripPreservesEveryField) {
  EventEncoder enc;
  auto events = SomeEvents();
  for (const auto& e : events) enc.Add(e);
  EventDecoder dec(enc.buffer());
  for (const auto& want : events) {
    Event got;
    auto more = dec.Next(&got);
    ASSERT_TRUE(more.ok()) << more.status().message();
    ASSERT_TRUE(*more);
    ASSERT_EQ(got.index(), want.index());
    if (auto* s = std::get_if<Sample>(&got)) {
      const auto& w = std::get<Sample>(want);
      EXPECT_EQ(s->time_ns, w.time_ns);
      EXPECT_EQ(s->kernel_chain, w.kernel_chain);
      EXPECT_EQ(s->user_chain, w.user_chain);
      EXPECT_EQ(s->user_stack.regs, w.user_stack.regs);
      EXPECT_EQ(s->user_stack.stack, w.user_stack.stack);
      EXPECT_EQ(s->user_stack.dyn_size, 3u);
      EXPECT_EQ(s->mode, CpuMode::kUser);
    } else if (auto* m = std::get_if<MmapEvent>(&got)) {
      EXPECT_EQ(m->time_ns, 999'000'000u);
      EXPECT_EQ(m->build_id, std::get<MmapEvent>(want).build_id);
      EXPECT_EQ(m->filename, "/usr/lib/libfoo.so");
      EXPECT_EQ(m->pgoff, 0x1000u);
    } else if (auto* c = std::get_if<CommEvent>(&got)) {
      EXPECT_EQ(c->comm, "spin");
      EXPECT_TRUE(c->exec);
    } else if (auto* l = std::get_if<LostEvent>(&got)) {
      EXPECT_EQ(l->cause, LossCause::kPaused);
      EXPECT_EQ(l->count, 17u);
    }
  }
  Event end;
  auto more = dec.Next(&end);
  ASSERT_TRUE(more.ok());
  EXPECT_FALSE(*more);
}

TEST(EventCodecTest, ChunksTakenMidStreamDecodeInSequence) {
  EventEncoder enc;
  auto events = SomeEvents();
  enc.Add(events[0]);
  std::string all = enc.Take();
  enc.Add(events[1]);
  all += enc.Take();
  EventDecoder dec(all);
  Event e;
  ASSERT_TRUE(*dec.Next(&e));
  ASSERT_TRUE(*dec.Next(&e));
  EXPECT_EQ(std::get<MmapEvent>(e).time_ns, 999'000'000u);
}

// Replay leaves stack copies where they were decoded: the sample's own copy
// stays empty and last_stack() views the same bytes a copying decoder hands
// out; registers of every varint length (1 to 10 bytes) decode the same.
TEST(EventCodecTest, BorrowedStackCopiesAreTheBytesACopyingDecoderGives) {
  EventEncoder enc;
  Sample s = std::get<Sample>(SomeEvents()[0]);
  s.user_stack.regs_mask = 0xffff;
  s.user_stack.regs.clear();
  for (int i = 0; i < 16; ++i) s.user_stack.regs.push_back(i == 15 ? ~0ull : 1ull << (i * 4));
  s.user_stack.stack.assign(3000, 0);
  for (size_t i = 0; i < s.user_stack.stack.size(); ++i) s.user_stack.stack[i] = i * 7;
  s.user_stack.dyn_size = 2999;
  enc.Add(Event(s));
  enc.Add(SomeEvents()[1]);
  for (bool borrow : {false, true}) {
    EventDecoder dec(enc.buffer());
    dec.set_borrow_stacks(borrow);
    Event e;
    ASSERT_TRUE(*dec.Next(&e));
    const Sample& got = std::get<Sample>(e);
    EXPECT_EQ(got.user_stack.regs, s.user_stack.regs);
    EXPECT_EQ(got.user_stack.dyn_size, 2999u);
    EXPECT_EQ(got.user_stack.stack.empty(), borrow);
    EXPECT_TRUE(std::equal(dec.last_stack().begin(), dec.last_stack().end(),
                           s.user_stack.stack.begin(), s.user_stack.stack.end()));
    ASSERT_TRUE(*dec.Next(&e));
    EXPECT_TRUE(dec.last_stack().empty());  // an mmap carries no copy
  }
}

// A varint read with ten bytes left (no check per byte) and one read at the
// end of the bytes (checked) agree on every length, on values that need the
// tenth byte, and on encodings over 64 bits, which both refuse.
TEST(EventCodecTest, VarintsDecodeTheSameWithAndWithoutBytesAfterThem) {
  std::mt19937_64 rng(11);
  std::vector<std::string> counts;
  for (int i = 0; i < 2000; ++i) {
    std::string v;
    AppendUleb128(&v, rng() >> (rng() % 64));
    counts.push_back(v);
  }
  counts.push_back(std::string(9, '\xff') + '\x01');     // 2^64 - 1
  counts.push_back(std::string(9, '\x80') + '\x02');     // 2^64: too big
  counts.push_back(std::string(10, '\x80') + '\x00');    // eleven bytes
  counts.push_back(std::string("\x81\x80\x80\x00", 4));  // padded, still 1
  for (const std::string& count : counts) {
    // A lost event (tag 5, time, cpu, cause, count), alone and followed by
    // padding.
    const std::string event = std::string("\x05\x02\x01\x01", 4) + count;
    std::optional<uint64_t> got[2];
    for (int padded = 0; padded < 2; ++padded) {
      const std::string bytes = event + std::string(padded ? 16 : 0, '\0');
      EventDecoder dec(bytes);
      Event e;
      auto r = dec.Next(&e);
      if (r.ok() && *r) got[padded] = std::get<LostEvent>(e).count;
    }
    EXPECT_EQ(got[0], got[1]);
    const auto* p = reinterpret_cast<const uint8_t*>(count.data());
    uint64_t want = 0;
    if (ReadUleb128(&p, p + count.size(), &want)) {
      EXPECT_EQ(got[1], std::optional<uint64_t>(want));
    } else {
      EXPECT_FALSE(got[1].has_value());
    }
  }
}

TEST(EventCodecTest, TruncatedStreamIsCorruptNotACrash) {
  EventEncoder enc;
  for (const auto& e : SomeEvents()) enc.Add(e);
  const std::string full = enc.buffer();
  for (size_t cut = 1; cut < full.size(); ++cut) {
    EventDecoder dec(std::string_view(full).substr(0, cut));
    Event e;
    StatusOr<bool> r = true;
    while (r.ok() && *r) r = dec.Next(&e);
    // Either it ends exactly at an event boundary or it reports corruption.
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kCorrupt);
    }
  }
}

TEST(EventCodecTest, RandomBytesNeverCrashOrExplode) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    std::string junk(rng() % 64, '\0');
    for (auto& ch : junk) ch = static_cast<char>(rng());
    EventDecoder dec(junk);
    Event e;
    StatusOr<bool> r = true;
    int n = 0;
    while (r.ok() && *r && n++ < 100) r = dec.Next(&e);
  }
  // A huge claimed callchain length is refused before allocating.
  std::string bomb = "\x01\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\x0f";
  EventDecoder dec(bomb);
  Event e;
  auto r = dec.Next(&e);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("byte 0"), std::string::npos);
}

}  // namespace
}  // namespace flightrec::recorder

namespace flightrec::recorder {
namespace {

TEST(EventCodecTest, SkimSampleKeysTheStackAndLeavesOtherEventsAlone) {
  auto sample = [](uint64_t t, uint32_t tid, std::vector<uint64_t> user) {
    Sample s;
    s.time_ns = t;
    s.cpu = 1;
    s.pid = 42;
    s.tid = tid;
    s.mode = CpuMode::kUser;
    s.ip = user.empty() ? 0x1000 : user[0];
    s.period = 1000;
    s.user_chain = std::move(user);
    return s;
  };
  EventEncoder enc;
  enc.Add(sample(100, 42, {0x401000, 0x402000}));
  enc.Add(sample(200, 43, {0x401000, 0x402000}));  // same stack, other thread and time
  enc.Add(sample(300, 42, {0x401000, 0x403000}));  // another caller
  CommEvent c;
  c.time_ns = 400;
  c.pid = c.tid = 42;
  c.comm = "x";
  enc.Add(c);
  Sample dwarf = sample(500, 42, {0x401000});
  dwarf.user_stack.regs_mask = 0x3;
  dwarf.user_stack.regs = {1, 2};
  dwarf.user_stack.stack = {1, 2, 3};
  dwarf.user_stack.dyn_size = 3;
  enc.Add(dwarf);
  std::string data = enc.Take();
  EventDecoder dec(data);
  SampleHead h;
  std::string k;
  uint32_t id = 0;
  using Skim = EventDecoder::Skim;
  // A stack's first use carries its definition: Next() reads both.
  EXPECT_EQ(dec.SkimSample(&h, &k, &id), Skim::kNone);
  Event e;
  ASSERT_TRUE(*dec.Next(&e));
  EXPECT_EQ(std::get<Sample>(e).time_ns, 100u);
  EXPECT_EQ(dec.last_stack_id(), 1u);
  // The same stack again: a reference, skimmed.
  ASSERT_EQ(dec.SkimSample(&h, &k, &id), Skim::kStackRef);
  EXPECT_EQ(id, 1u);
  EXPECT_EQ(h.time_ns, 200u);
  EXPECT_EQ(h.pid, 42u);
  EXPECT_EQ(h.tid, 43u);
  EXPECT_EQ(h.period, 1000u);
  // Another caller: a new definition.
  EXPECT_EQ(dec.SkimSample(&h, &k, &id), Skim::kNone);
  ASSERT_TRUE(*dec.Next(&e));
  EXPECT_EQ(dec.last_stack_id(), 2u);
  EXPECT_EQ(std::get<Sample>(e).user_chain, (std::vector<uint64_t>{0x401000, 0x403000}));
  EXPECT_EQ(std::get<Sample>(e).tid, 42u);
  // A comm event and a sample with a stack copy are left to Next().
  EXPECT_EQ(dec.SkimSample(&h, &k, &id), Skim::kNone);
  ASSERT_TRUE(*dec.Next(&e));
  EXPECT_TRUE(std::holds_alternative<CommEvent>(e));
  EXPECT_EQ(dec.SkimSample(&h, &k, &id), Skim::kNone);
  ASSERT_TRUE(*dec.Next(&e));
  ASSERT_TRUE(std::holds_alternative<Sample>(e));
  EXPECT_EQ(std::get<Sample>(e).time_ns, 500u);  // time deltas survived the skims
  EXPECT_EQ(std::get<Sample>(e).user_stack.regs.size(), 2u);
  EXPECT_EQ(dec.last_stack_id(), 0u);
  EXPECT_FALSE(*dec.Next(&e));
  // A cut reference is declined, not misread.
  EventDecoder cut(std::string_view(data).substr(0, 5));
  EXPECT_EQ(cut.SkimSample(&h, &k, &id), Skim::kNone);
}

TEST(EventCodecTest, ManySamplesOfFewStacksTakeAFewBytesEach) {
  EventEncoder enc;
  Sample s;
  s.pid = s.tid = 4242;
  s.mode = CpuMode::kUser;
  s.period = 1'001'001;
  s.kernel_chain = {0xffffffff81000000, 0xffffffff81000100, 0xffffffff81000200};
  for (int i = 0; i < 10000; ++i) {
    s.time_ns = 1'000'000'000ull + i * 50'000ull;
    s.cpu = i % 2;
    s.period = 1'001'001 + (i % 3);
    s.ip = 0x555500001000 + (i % 4) * 0x40;
    s.user_chain = {s.ip, 0x555500002000, 0x7f0000001000, 0x7f0000002000};
    enc.Add(s);
  }
  EXPECT_LT(enc.size(), 10000u * 12) << "references, not stacks";
  EventDecoder dec(enc.buffer());
  Event e;
  for (int i = 0; i < 10000; ++i) {
    ASSERT_TRUE(*dec.Next(&e)) << i;
    const Sample& got = std::get<Sample>(e);
    ASSERT_EQ(got.time_ns, 1'000'000'000ull + i * 50'000ull);
    ASSERT_EQ(got.period, 1'001'001u + (i % 3));
    ASSERT_EQ(got.ip, 0x555500001000u + (i % 4) * 0x40);
    ASSERT_EQ(got.user_chain.size(), 4u);
    ASSERT_EQ(got.kernel_chain, s.kernel_chain);
    ASSERT_EQ(dec.last_stack_id(), static_cast<uint32_t>(i % 4 + 1));
  }
}

// The exact bytes of every event kind, including stack definitions, repeated
// references, a time going back, a falling period and 10-byte varints: the
// encoder's fast paths must write what docs/FORMAT.md specifies (these bytes
// are from the encoder before them), or old and new records would differ.
TEST(EventCodecTest, EncodingIsByteForByteTheFormats) {
  EventEncoder enc;
  for (const Event& e : SomeEvents()) enc.Add(e);
  Sample s;
  s.pid = s.tid = 4242;
  s.mode = CpuMode::kUser;
  s.ip = 0x555500001000;
  s.user_chain = {s.ip, 0x555500002000, 0x7f0000001000};
  const uint64_t times[] = {2'000'000'000, 2'001'001'001, 2'000'500'000, 2'002'000'000};
  const uint64_t periods[] = {1'001'001, 1'001'002, 1'000'999, UINT64_MAX};
  for (int i = 0; i < 4; ++i) {
    s.time_ns = times[i];
    s.cpu = static_cast<uint32_t>(i % 2);
    s.period = periods[i];
    s.tid = 4242 + static_cast<uint32_t>(i);
    if (i == 2) {
      s.mode = CpuMode::kKernel;
      s.ip = 0xffffffff81000040;
      s.kernel_chain = {s.ip, 0xffffffff81000000, UINT64_MAX};
    }
    enc.Add(s);
  }
  std::string hex;
  for (unsigned char c : enc.buffer()) hex += fmt::format("{:02x}", c);
  EXPECT_EQ(hex,
            "0180a8d6b907012a2b02b4a48080d0aa15c0843d02e7c880f0afd52a80040300e70880808080e0ea"
            "140302078080f0ff0704010203040302ff887a2a2a8080808080e01f80a00880200801c0c4070502"
            "030102ff122f7573722f6c69622f6c6962666f6f2e736f0003e8907a2a2a047370696e0104c8012c"
            "2a2c2a0005c8010003110692210280a08080d0aa15000300804080c0ffffdfea1407889dd6b90700"
            "9221d2987a0107d2987a019321020106922101c0808088f8ffffffff0103007ffeffffef0f0380bf"
            "80f0afd52a804080c0ffffdfea140791943d009421050207c08db701019521cf987a02");
}

TEST(EventCodecTest, ARetryAfterACutRedefinesTheSameStacks) {
  // Replay decodes chunk by chunk; an event cut by a chunk's end is retried
  // from a saved state. A definition read before the cut must not be kept
  // twice, or every later id would be off by one.
  EventEncoder enc;
  Sample s;
  s.pid = s.tid = 7;
  s.mode = CpuMode::kUser;
  s.ip = 0x1000;
  s.user_chain = {0x1000, 0x2000};
  s.time_ns = 10;
  enc.Add(s);
  s.ip = 0x1100;
  s.time_ns = 20;
  enc.Add(s);
  const std::string full = enc.buffer();
  for (size_t cut = 1; cut < full.size(); ++cut) {
    EventDecoder dec(std::string_view(full).substr(0, cut));
    Event e;
    auto saved = dec.Save();
    auto r = dec.Next(&e);
    size_t got = 0;
    while (r.ok() && *r) {
      ++got;
      saved = dec.Save();
      r = dec.Next(&e);
    }
    dec.Restore(saved);
    dec.Rebase(std::string_view(full).substr(saved.pos));
    while (*dec.Next(&e)) ++got;
    EXPECT_EQ(got, 2u) << "cut at " << cut;
    EXPECT_EQ(std::get<Sample>(e).ip, 0x1100u) << "cut at " << cut;
    EXPECT_EQ(dec.last_stack_id(), 2u) << "cut at " << cut;
  }
}

TEST(EventCodecTest, VersionOneSamplesStillDecodeAndSkimByBytes) {
  // A version 1 stream (tag 1 samples, no stack table), written by hand.
  std::string v1;
  auto put = [&v1](uint64_t v) {
    while (v >= 0x80) {
      v1.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    v1.push_back(static_cast<char>(v));
  };
  for (uint64_t t : {100, 200}) {
    v1.push_back(1);                 // tag: Sample
    put(t == 100 ? 200 : 200);       // time delta 100, zig-zag
    put(1);                          // cpu
    put(42);                         // pid
    put(t == 100 ? 42 : 43);         // tid
    put(2);                          // mode user
    put(0x401000);                   // ip
    put(1000);                       // period
    put(0);                          // kernel chain
    put(2);                          // user chain: 2 frames, deltas from ip
    put(0);                          // 0x401000
    put(0x1000 << 1);                // +0x1000
    put(0), put(0), put(0), put(0);  // regs mask, regs, stack bytes, dyn size
  }
  EventDecoder dec(v1);
  SampleHead h;
  std::string k1, k2;
  uint32_t id = 0;
  ASSERT_EQ(dec.SkimSample(&h, &k1, &id), EventDecoder::Skim::kBytes);
  EXPECT_EQ(h.time_ns, 100u);
  ASSERT_EQ(dec.SkimSample(&h, &k2, &id), EventDecoder::Skim::kBytes);
  EXPECT_EQ(h.tid, 43u);
  EXPECT_EQ(k1, k2);
  EventDecoder full(v1);
  Event e;
  ASSERT_TRUE(*full.Next(&e));
  EXPECT_EQ(std::get<Sample>(e).user_chain, (std::vector<uint64_t>{0x401000, 0x402000}));
  EXPECT_EQ(full.last_stack_id(), 0u);
}

TEST(EventCodecTest, AReferenceToAnUndefinedStackIsCorrupt) {
  // tag 7: time, cpu, tid, period delta, stack id 5 — never defined.
  const std::string bad("\x07\x02\x00\x01\x00\x05", 6);
  EventDecoder dec(bad);
  Event e;
  auto r = dec.Next(&e);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("undefined stack"), std::string::npos);
  SampleHead h;
  std::string k;
  uint32_t id = 0;
  EventDecoder skim(bad);
  EXPECT_EQ(skim.SkimSample(&h, &k, &id), EventDecoder::Skim::kNone);
}

}  // namespace
}  // namespace flightrec::recorder
