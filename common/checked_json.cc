#include "common/checked_json.h"

#include <fmt/format.h>

namespace flightrec::json {

Shape Scan(std::string_view text) {
  Shape shape;
  size_t depth = 0;
  bool in_string = false, escaped = false;
  shape.values = 1;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      ++shape.values;
      if (++depth > shape.depth) shape.depth = depth;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    } else if (c == ',') {
      ++shape.values;
    }
  }
  return shape;
}

StatusOr<Json> ParseUntrusted(std::string_view text, const std::string& what, size_t max_depth,
                              size_t max_values) {
  const Shape shape = Scan(text);
  if (shape.depth > max_depth) {
    return Corrupt(fmt::format("{}: JSON nested deeper than {} levels", what, max_depth));
  }
  if (shape.values > max_values) {
    return Corrupt(fmt::format("{}: JSON holds more than {} values", what, max_values));
  }
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Corrupt(fmt::format("{}: not valid JSON", what));
  return j;
}

Json ParseBounded(std::string_view text, size_t max_depth) {
  if (Scan(text).depth > max_depth) return Json(Json::value_t::discarded);
  return Json::parse(text, nullptr, /*allow_exceptions=*/false);
}

}  // namespace flightrec::json
