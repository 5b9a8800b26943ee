// ModuleBackend: the capture backend over flightrec.ko (/dev/flightrec).
//
// The module samples every CPU from boot into its own overwrite rings (DATA:
// fixed 512-byte sample records; AUX: registers + user stack bytes; SIDEBAND:
// mmap/exec/fork/exit in a ring that does not overwrite). This backend drains
// SIDEBAND into the daemon's process table like the perf backend's sideband,
// and a dump freezes the module (FREEZE), copies each CPU's DATA and AUX
// ranges out (READ_RING), thaws, and converts the records into the same
// `Sample` events the perf backend produces — so records from either backend
// replay through the same attribution pipeline. Loss comes from the module's
// exact per-CPU counters (module/uapi/flightrec.h).
#pragma once

#include <linux/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/scoped_fd.h"
#include "module/uapi/flightrec.h"
#include "recorder/daemon/capture_backend.h"

namespace flightrec::recorder::module {

// Pure conversions, exposed for unit tests.
std::optional<Event> SidebandEvent(const flightrec_sideband& r);
// A drained batch of sideband records as events, execs moved before the
// mappings of the image they loaded (see the .cc).
std::vector<Event> OrderSideband(std::vector<flightrec_sideband> batch);
// aux: the AUX blob of this sample (header + stack), or nullptr.
Sample SampleFromRecord(const flightrec_sample& r, uint64_t period_ns, const flightrec_aux* aux,
                        const uint8_t* stack, size_t stack_len);

class ModuleBackend : public CaptureBackend {
 public:
  static StatusOr<std::unique_ptr<ModuleBackend>> Create(
      const std::string& device = FLIGHTREC_DEVICE);

  std::string name() const override { return "module"; }
  nlohmann::json Describe() const override;
  std::vector<int> SidebandFds() const override { return {}; }  // drained on the daemon's timer
  Status DrainSideband(const std::function<void(const Event&)>& sink) override;
  StatusOr<Snapshot> TakeSnapshot(int64_t last_ns) override;
  nlohmann::json Stats() override;

 private:
  ModuleBackend() = default;
  StatusOr<std::vector<flightrec_cpu_stats>> ReadStats(flightrec_stats* global);
  uint64_t SamplePeriodNs() const;

  ScopedFd fd_;
  flightrec_info info_{};
};

}  // namespace flightrec::recorder::module
