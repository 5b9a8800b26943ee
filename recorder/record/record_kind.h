// The kinds of record in the store and their one spelling (the record
// header's `kind`, the index's kind column, `--kind`, `crash list`'s KIND
// column; docs/FORMAT.md). Code compares RecordKind values; only this table
// turns a kind into text and back, so a new kind is one enumerator and one
// name here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/text_enum.h"

namespace flightrec::recorder {

enum class RecordKind : uint8_t {
  kOther,  // text that names no kind below (a newer writer's, a damaged header)
  kDump,   // the rings' last seconds, on request or trigger
  kCrash,  // a core with its metadata, written by the coredump hook
  // A process killed by a signal without a crash record (SIGKILL, a core the
  // hook never got): a dump record of its history plus a crash's metadata.
  kDeath,
  // A kernel panic's history, kept across the reboot by flightrec.ko and
  // stored by recorderd at the next start (a dump record plus section `panic`).
  kPanic,
  kOom,  // a process the kernel's OOM killer chose
};
struct RecordKindTraits {
  using Enum = RecordKind;
  static constexpr std::string_view kNames[] = {"", "dump", "crash", "death", "panic", "oom"};
  static constexpr Enum kUnknown = RecordKind::kOther;
};

inline std::string RecordKindName(RecordKind kind) {
  return std::string(TextEnum<RecordKindTraits>(kind).ToString());
}
inline RecordKind ParseRecordKind(std::string_view text) {
  return TextEnum<RecordKindTraits>(text).value();
}
inline void to_json(nlohmann::json& j, RecordKind kind) { j = RecordKindName(kind); }

}  // namespace flightrec::recorder
