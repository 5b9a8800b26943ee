#include "recorder/attribution/cookie_table.h"

#include <sys/sysmacros.h>

#include <charconv>

#include "recorder/elf/build_id.h"

namespace flightrec::recorder::attribution {

namespace {

bool IsSpecial(const std::string& name) {
  return name.empty() || name[0] != '/' || name.rfind("/memfd:", 0) == 0;
}

// "path\nbuild-id\ndev\nino", built by hand: a dump interns every mmap of
// its processes' history, and fmt::format's parsing was most of the cost.
std::string Key(const std::string& path, const std::string& build_id, uint64_t dev, uint64_t ino) {
  std::string key;
  key.reserve(path.size() + build_id.size() + 44);
  key.append(path).push_back('\n');
  key.append(build_id).push_back('\n');
  char num[24];
  key.append(num, std::to_chars(num, num + sizeof(num), dev).ptr).push_back('\n');
  key.append(num, std::to_chars(num, num + sizeof(num), ino).ptr);
  return key;
}

}  // namespace

nlohmann::json Cookie::ToJson() const {
  return {{"id", id}, {"path", path}, {"build_id", build_id}, {"dev", dev}, {"ino", ino}};
}

uint32_t CookieTable::Intern(const MmapEvent& m) {
  if (IsSpecial(m.filename)) return 0;
  std::string bid = HexBuildId(m.build_id);
  uint64_t dev = makedev(m.maj, m.min);
  std::string key = Key(m.filename, bid, dev, m.ino);
  auto it = by_key_.find(key);
  if (it != by_key_.end()) return it->second;
  Cookie c;
  c.id = static_cast<uint32_t>(cookies_.size() + 1);
  c.path = m.filename;
  c.build_id = bid;
  c.dev = dev;
  c.ino = m.ino;
  cookies_.push_back(c);
  by_key_[key] = c.id;
  return c.id;
}

const Cookie* CookieTable::Get(uint32_t id) const {
  if (id == 0 || id > cookies_.size()) return nullptr;
  return &cookies_[id - 1];
}

nlohmann::json CookieTable::ToJson() const {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& c : cookies_) j.push_back(c.ToJson());
  return j;
}

StatusOr<CookieTable> CookieTable::FromJson(const nlohmann::json& j) {
  CookieTable t;
  try {
    for (const auto& e : j) {
      Cookie c;
      c.id = e.at("id").get<uint32_t>();
      c.path = e.at("path").get<std::string>();
      c.build_id = e.value("build_id", "");
      c.dev = e.value("dev", uint64_t{0});
      c.ino = e.value("ino", uint64_t{0});
      if (c.id != t.cookies_.size() + 1) return Corrupt("cookie table: ids out of sequence");
      t.by_key_[Key(c.path, c.build_id, c.dev, c.ino)] = c.id;
      t.cookies_.push_back(std::move(c));
    }
  } catch (const std::exception& e) {
    return Corrupt(std::string("cookie table: ") + e.what());
  }
  return t;
}

}  // namespace flightrec::recorder::attribution
