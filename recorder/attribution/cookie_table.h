// File identities (dcookies): a mapped file named by build-id, path and
// device/inode, so a record stays meaningful after the file is gone.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "recorder/elf/build_id.h"
#include "recorder/model/events.h"

namespace flightrec::recorder::attribution {

// Identity of a mapped file.
struct Cookie {
  uint32_t id = 0;
  std::string path;
  std::string build_id;  // lowercase hex, "" if unknown
  uint64_t dev = 0;      // makedev(maj, min)
  uint64_t ino = 0;
  nlohmann::json ToJson() const;
};

class CookieTable {
 public:
  // Returns the cookie for this mapping's file, creating it if new.
  uint32_t Intern(const MmapEvent& m);
  const Cookie* Get(uint32_t id) const;
  const std::vector<Cookie>& all() const { return cookies_; }
  nlohmann::json ToJson() const;
  static StatusOr<CookieTable> FromJson(const nlohmann::json& j);

 private:
  std::vector<Cookie> cookies_;  // id = index + 1
  std::map<std::string, uint32_t> by_key_;
};

// The build-id readers live in the ELF layer; these names stay for callers.
using elf::HexBuildId;
using elf::ReadBuildId;

}  // namespace flightrec::recorder::attribution
