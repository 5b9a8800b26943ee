#include "recorder/attribution/attributor.h"

#include <fmt/format.h>

namespace flightrec::recorder::attribution {

std::optional<AttributedSample> Attributor::Add(const Event& e) {
  auto* s = std::get_if<Sample>(&e);
  if (s == nullptr) {
    table_.Apply(e);
    return std::nullopt;
  }
  return Attribute(*s, table_, cookies_, unwinder_, &no_mapping_);
}

AttributedSample Attribute(const Sample& sample, const ProcessTable& table,
                           const CookieTable& cookies, UserUnwinder* unwinder,
                           uint64_t* no_mapping) {
  const Sample* s = &sample;
  AttributedSample a;
  a.time_ns = s->time_ns;
  a.cpu = s->cpu;
  a.pid = s->pid;
  const auto thread = table.ThreadAt(s->pid, s->tid, s->time_ns);
  a.tid = thread.tid;
  a.period = s->period;
  a.comm = *thread.comm;
  for (uint64_t ip : s->kernel_chain) {
    Frame f;
    f.kernel = true;
    f.offset = ip;
    a.frames.push_back(f);
  }
  if (s->kernel_chain.empty() && s->mode == CpuMode::kKernel) {
    a.frames.push_back(Frame{true, 0, s->ip, ""});
  }
  std::vector<uint64_t> user;
  if (unwinder != nullptr && !s->user_stack.regs.empty()) {
    // DWARF: entry 0 is the interrupted ip, the rest are return addresses,
    // exactly like a frame-pointer chain, so the lookup below applies as is.
    user = unwinder->Unwind(*s, table, cookies, &a.unwind);
  }
  if (user.empty()) user = s->user_chain;
  if (user.empty() && s->mode == CpuMode::kUser) user.push_back(s->ip);
  a.frames.reserve(a.frames.size() + user.size());  // DWARF stacks: 20+ frames, one allocation
  for (size_t i = 0; i < user.size(); ++i) {
    // Return addresses point after the call: look up ip-1 for callers so a
    // call at a function's very end attributes to that function.
    uint64_t ip = user[i];
    uint64_t look = i == 0 ? ip : ip - 1;
    Frame f;
    const Mapping* m = table.Lookup(s->pid, look);
    if (m == nullptr) {
      if (no_mapping) ++*no_mapping;
      f.special = "[unknown]";
      f.offset = ip;
    } else if (m->cookie == 0) {
      f.special = m->name.empty() ? "[anon]" : m->name;
      f.offset = ip - m->start;
    } else {
      f.cookie = m->cookie;
      f.offset = look - m->start + m->pgoff;
    }
    a.frames.push_back(f);
  }
  return a;
}

}  // namespace flightrec::recorder::attribution
