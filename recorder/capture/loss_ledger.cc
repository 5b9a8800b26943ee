#include "recorder/capture/loss_ledger.h"

#include <iterator>
#include <stdexcept>
#include <string>

#include "common/checked_json.h"

namespace flightrec::recorder {

// Indexed by LossCounter; the names are the record format's (docs/FORMAT.md).
constexpr const char* kNames[] = {"produced",
                                  "in_ring",
                                  "in_window",
                                  "outside_window",
                                  "paused",
                                  "overwritten",
                                  "ring_lost_records",
                                  "malformed",
                                  "malformed_bytes",
                                  "sideband_lost",
                                  "lost_in_window",
                                  "overwritten_in_window",
                                  "paused_in_window",
                                  "ring_lost_in_window",
                                  "size",
                                  "torn_bytes",
                                  "overwritten_bytes",
                                  "throttled",
                                  "cpus_not_counting",
                                  "filtered_pid",
                                  "not_copied",
                                  "below_threshold",
                                  "end_unknown"};
static_assert(std::size(kNames) == static_cast<size_t>(LossCounter::kEnd),
              "one name per LossCounter, in enum order");

const char* ToString(LossCounter c) {
  const auto i = static_cast<size_t>(c);
  return i < std::size(kNames) ? kNames[i] : "unknown";
}

void LossLedger::Set(LossCounter c, uint64_t v) {
  values_[Index(c)] = v;
  present_[Index(c)] = true;
}

void LossLedger::Add(LossCounter c, uint64_t v) {
  values_[Index(c)] += v;
  present_[Index(c)] = true;
}

uint64_t LossLedger::at(std::string_view name) const {
  for (size_t i = 0; i < values_.size(); ++i) {
    if (present_[i] && name == ToString(static_cast<LossCounter>(i))) return values_[i];
  }
  throw std::out_of_range("loss counter not present: " + std::string(name));
}

LossLedger& LossLedger::operator+=(const LossLedger& o) {
  for (size_t i = 0; i < values_.size(); ++i) {
    if (o.present_[i]) Add(static_cast<LossCounter>(i), o.values_[i]);
  }
  return *this;
}

nlohmann::json LossLedger::ToJson() const {
  nlohmann::json j = nlohmann::json::object();
  for (size_t i = 0; i < values_.size(); ++i) {
    if (present_[i]) j[ToString(static_cast<LossCounter>(i))] = values_[i];
  }
  return j;
}

LossLedger LossLedger::FromJson(const nlohmann::json& j) {
  LossLedger l;
  if (!j.is_object()) return l;
  for (size_t i = 0; i < std::size(kNames); ++i) {
    if (j.contains(kNames[i]))
      l.Set(static_cast<LossCounter>(i), json::Get<uint64_t>(j, kNames[i], 0));
  }
  return l;
}

uint64_t LossLedger::LostInWindow() const {
  if (Has(LossCounter::kLostInWindow)) return Get(LossCounter::kLostInWindow);
  return Get(LossCounter::kPaused) + Get(LossCounter::kOverwritten) +
         Get(LossCounter::kRingLostRecords);
}

}  // namespace flightrec::recorder
