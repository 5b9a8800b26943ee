#include "recorder/model/frame_status.h"

#include <fmt/format.h>

namespace flightrec::recorder {

std::string Symbol::Display() const {
  if (!function.empty()) return function;
  if (status == SymbolCode::kFileChanged)
    return fmt::format("{}+0x{:x} (file changed)", dso, offset);
  return fmt::format("{}+0x{:x}", dso, offset);
}

}  // namespace flightrec::recorder
