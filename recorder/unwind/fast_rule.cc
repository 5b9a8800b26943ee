#include "recorder/unwind/fast_rule.h"

#include <cstring>

namespace flightrec::recorder::unwind {
namespace {

// The layout of libunwind 1.6's dwarf_reg_state_t (its include/dwarf.h,
// not installed) on x86-64: DWARF_NUM_PRESERVED_REGS = 17 columns, then the
// CFA's register and offset. Only read when the record handed to the
// callback has exactly this size; otherwise no row is fast.
struct RegStateLayout {
  uint64_t ret_addr_column;
  char where[17 + 2];
  uint64_t val[17 + 2];
};
static_assert(sizeof(RegStateLayout) == 184);
constexpr int kCfaRegColumn = 17, kCfaOffColumn = 18;
// dwarf_where_t
constexpr char kWhereUndef = 0, kWhereSame = 1, kWhereCfaRel = 2, kWhereReg = 3;

}  // namespace

FastRule MakeFastRule(const void* data, size_t size) {
  FastRule f;
  if (size != sizeof(RegStateLayout)) return f;
  RegStateLayout rs;
  std::memcpy(&rs, data, sizeof(rs));
  if (rs.ret_addr_column != kRipColumn || rs.where[kCfaRegColumn] != kWhereReg ||
      rs.val[kCfaRegColumn] >= kRipColumn) {
    return f;
  }
  f.cfa_reg = static_cast<uint8_t>(rs.val[kCfaRegColumn]);
  f.cfa_off = static_cast<int64_t>(rs.val[kCfaOffColumn]);
  for (int i = 0; i < 17; ++i) {
    switch (rs.where[i]) {
      case kWhereSame:
        break;
      case kWhereUndef:
        f.set[f.count++] = {static_cast<uint8_t>(i), true, 0};
        break;
      case kWhereCfaRel:
        f.set[f.count++] = {static_cast<uint8_t>(i), false, static_cast<int64_t>(rs.val[i])};
        break;
      default:  // another register, DWARF expressions: libunwind's job
        return f;
    }
  }
  f.ok = true;
  return f;
}

}  // namespace flightrec::recorder::unwind
