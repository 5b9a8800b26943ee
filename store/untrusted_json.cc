#include "store/untrusted_json.h"

#include <fmt/format.h>

namespace flightrec::store {

JsonShape ScanJson(std::string_view text) {
  JsonShape shape;
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

StatusOr<nlohmann::json> ParseUntrustedJson(std::string_view text, const std::string& what,
                                            size_t max_depth, size_t max_values) {
  JsonShape shape = ScanJson(text);
  if (shape.depth > max_depth) {
    return Corrupt(fmt::format("{}: JSON nested deeper than {} levels", what, max_depth));
  }
  if (shape.values > max_values) {
    return Corrupt(fmt::format("{}: JSON holds more than {} values", what, max_values));
  }
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Corrupt(fmt::format("{}: not valid JSON", what));
  return j;
}

int64_t JsonInt(const nlohmann::json& o, const char* key, int64_t def) {
  if (!o.is_object()) return def;
  auto it = o.find(key);
  if (it == o.end() || !it->is_number_integer()) return def;
  return it->get<int64_t>();
}

std::string JsonStr(const nlohmann::json& o, const char* key, const std::string& def) {
  if (!o.is_object()) return def;
  auto it = o.find(key);
  if (it == o.end() || !it->is_string()) return def;
  return it->get<std::string>();
}

bool JsonBool(const nlohmann::json& o, const char* key, bool def) {
  if (!o.is_object()) return def;
  auto it = o.find(key);
  if (it == o.end() || !it->is_boolean()) return def;
  return it->get<bool>();
}

const nlohmann::json& JsonObj(const nlohmann::json& o, const char* key) {
  static const nlohmann::json kEmpty = nlohmann::json::object();
  if (!o.is_object()) return kEmpty;
  auto it = o.find(key);
  if (it == o.end() || !it->is_object()) return kEmpty;
  return *it;
}

}  // namespace flightrec::store
