// An enumerated status that travels as text. Unwind notes and symbol
// statuses used to be free strings compared by value; now the code names
// enumerators and the compiler checks them, while the printed text (reports,
// exports, JSON, record sections, test assertions) stays byte for byte what
// it was: each enumerator has exactly one spelling, given by Traits::kNames.
//
// Construction from text exists for the places that read or write the
// spelling (tests, exporters); text that names no enumerator becomes
// Traits::kUnknown, never a new value.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace flightrec {

// Traits: `using Enum = ...;` (an enum class with values 0..N-1),
// `static constexpr std::string_view kNames[N]` (index = value) and
// `static constexpr Enum kUnknown`.
template <typename Traits>
class TextEnum {
 public:
  using Enum = typename Traits::Enum;

  constexpr TextEnum() : e_(Enum{}) {}
  constexpr TextEnum(Enum e) : e_(e) {}                             // NOLINT: implicit by design
  TextEnum(std::string_view text) : e_(Parse(text)) {}              // NOLINT
  TextEnum(const char* text) : TextEnum(std::string_view(text)) {}  // NOLINT
  TextEnum(const std::string& text) : TextEnum(std::string_view(text)) {}  // NOLINT

  constexpr Enum value() const { return e_; }
  constexpr std::string_view ToString() const { return Traits::kNames[static_cast<size_t>(e_)]; }
  // The text, for code that handles it as a string (printing, labels).
  operator std::string() const { return std::string(ToString()); }  // NOLINT
  bool empty() const { return ToString().empty(); }

  friend constexpr bool operator==(TextEnum a, TextEnum b) { return a.e_ == b.e_; }
  friend constexpr bool operator==(TextEnum a, Enum b) { return a.e_ == b; }
  friend bool operator==(TextEnum a, std::string_view b) { return a.ToString() == b; }
  friend bool operator==(TextEnum a, const char* b) { return a.ToString() == b; }
  friend std::ostream& operator<<(std::ostream& os, TextEnum t) { return os << t.ToString(); }
  friend void to_json(nlohmann::json& j, TextEnum t) { j = std::string(t.ToString()); }

 private:
  static Enum Parse(std::string_view text) {
    for (size_t i = 0; i < std::size(Traits::kNames); ++i) {
      if (Traits::kNames[i] == text) return static_cast<Enum>(i);
    }
    return Traits::kUnknown;
  }
  Enum e_;
};

}  // namespace flightrec
