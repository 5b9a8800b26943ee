#include "recorder/elf/build_id.h"

#include <gelf.h>

#include <cstring>

#include "recorder/elf/elf_handle.h"

namespace flightrec::recorder::elf {

std::string BuildIdOf(Elf* elf) {
  size_t n = 0;
  if (elf_getphdrnum(elf, &n) != 0) return "";
  for (size_t i = 0; i < n; ++i) {
    GElf_Phdr ph;
    if (gelf_getphdr(elf, static_cast<int>(i), &ph) == nullptr || ph.p_type != PT_NOTE) continue;
    Elf_Data* data = elf_getdata_rawchunk(elf, ph.p_offset, ph.p_filesz, ELF_T_NHDR);
    if (data == nullptr) continue;
    size_t off = 0, name_off = 0, desc_off = 0;
    GElf_Nhdr nh;
    while ((off = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
      if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
          std::memcmp(static_cast<char*>(data->d_buf) + name_off, "GNU", 4) == 0) {
        return std::string(static_cast<char*>(data->d_buf) + desc_off, nh.n_descsz);
      }
    }
  }
  return "";
}

std::string ReadBuildId(const std::string& path) {
  ElfFile f = ElfFile::Open(path);
  return f ? BuildIdOf(f.elf()) : "";
}

std::string HexBuildId(const std::string& raw) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(raw.size() * 2, '\0');
  for (size_t i = 0; i < raw.size(); ++i) {
    const auto c = static_cast<unsigned char>(raw[i]);
    out[2 * i] = kHex[c >> 4];
    out[2 * i + 1] = kHex[c & 15];
  }
  return out;
}

}  // namespace flightrec::recorder::elf
