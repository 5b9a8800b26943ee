#include "recorder/record/loss_report.h"

#include "common/checked_json.h"

namespace flightrec::recorder {

LossReport LossReport::FromJson(const nlohmann::json& loss) {
  LossReport r;
  if (!loss.is_object()) return r;
  r.present = true;
  r.window = LossLedger::FromJson(loss);
  if (loss.contains(kLossOffCpu)) {
    const auto& off = json::Object(loss, kLossOffCpu);
    r.off_cpu = OffCpu{LossLedger::FromJson(json::Object(off, "switch_out")),
                       LossLedger::FromJson(json::Object(off, "switch_in")),
                       LossLedger::FromJson(json::Object(off, "intervals"))};
  }
  return r;
}

}  // namespace flightrec::recorder
