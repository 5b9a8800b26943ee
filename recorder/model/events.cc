#include "recorder/model/events.h"

namespace flightrec::recorder {

const char* LossCauseName(LossCause cause) {
  switch (cause) {
    case LossCause::kRingLost:
      return "ring_lost";
    case LossCause::kSidebandLost:
      return "sideband_lost";
    case LossCause::kPaused:
      return "paused";
    case LossCause::kOverwritten:
      return "overwritten";
    case LossCause::kOutsideWindow:
      return "outside_window";
    case LossCause::kFilteredPid:
      return "filtered_pid";
    case LossCause::kTorn:
      return "torn";
    case LossCause::kSize:
      return "size";
  }
  return "unknown";
}

}  // namespace flightrec::recorder
