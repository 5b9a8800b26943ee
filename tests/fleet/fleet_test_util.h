// Small helpers shared by the fleet tests.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

namespace flightrec::testing {

inline void WriteRandomFile(const std::filesystem::path& p, uint64_t size, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::ofstream out(p, std::ios::binary);
  std::vector<uint64_t> buf(1 << 16);
  uint64_t left = size;
  while (left > 0) {
    for (auto& w : buf) w = rng();
    uint64_t n = std::min<uint64_t>(left, buf.size() * sizeof(uint64_t));
    out.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(n));
    left -= n;
  }
}

inline std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace flightrec::testing
