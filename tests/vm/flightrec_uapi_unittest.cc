// The uapi header is an ABI: these asserts fail the build when a field
// moves, and the test also proves the header compiles as C++20.
#include <cstddef>

#include "module/uapi/flightrec.h"

// CHECK_LAYOUT(type, size, field, offset, field, offset, ...): one
// static_assert for the size of `type` and one for each listed field's
// offset. The (field, offset) pairs are walked with the __VA_OPT__ recursion
// idiom: CHECK_FIELDS emits one assert and names itself again for the rest
// through CHECK_FIELDS_AGAIN, which is only expanded by a further rescan, and
// EXPAND provides 16 rescans (more fields than any struct here lists).
#define EXPAND(...) EXPAND4(EXPAND4(EXPAND4(EXPAND4(__VA_ARGS__))))
#define EXPAND4(...) EXPAND1(EXPAND1(EXPAND1(EXPAND1(__VA_ARGS__))))
#define EXPAND1(...) __VA_ARGS__
#define PARENS ()
#define CHECK_FIELDS(type, field, off, ...)                          \
  static_assert(offsetof(type, field) == (off), #type "." #field); \
  __VA_OPT__(CHECK_FIELDS_AGAIN PARENS(type, __VA_ARGS__))
#define CHECK_FIELDS_AGAIN() CHECK_FIELDS
#define CHECK_LAYOUT(type, size, ...)                  \
  __VA_OPT__(EXPAND(CHECK_FIELDS(type, __VA_ARGS__))) \
  static_assert(sizeof(type) == (size), #type)

// DATA record header; frames follow
CHECK_LAYOUT(flightrec_sample, 64,
             size, 0, type, 4, flags, 6, time_ns, 8, seq, 32, aux_len, 40, mode, 56, abi, 62);
static_assert(FLIGHTREC_SAMPLE_MAX_SIZE == 512);
static_assert(FLIGHTREC_DATA_CHUNK == 4096);
CHECK_LAYOUT(flightrec_aux, 216, regs, 24);
CHECK_LAYOUT(flightrec_sideband, 512, dev, 48, path, 88);
CHECK_LAYOUT(flightrec_info, 88, period, 32, markers_per_uid, 68, reserved, 72);
CHECK_LAYOUT(flightrec_cpu_stats, 104, produced, 8, data_head, 72, handler_ns, 88, reserved, 96);
CHECK_LAYOUT(flightrec_stats, 64,
             sideband_written, 16, crash_hook, 48, crash_hook_error, 52, markers_coalesced, 56,
             markers_uid_limited, 60);
CHECK_LAYOUT(flightrec_cpu_stats_ev, 152,
             s, 0, event_state, 104, throttled, 112, time_running, 128);
CHECK_LAYOUT(flightrec_read, 112, from, 8, first, 40, flags, 88, reserved, 96);
CHECK_LAYOUT(flightrec_marker, 56, slot, 16, nr_cpus, 32, cpu, 36, hook_ns, 40, copied_bytes, 48);
static_assert(FLIGHTREC_SAMPLE_CRASH == 8);
static_assert(FLIGHTREC_VERSION == 2);
CHECK_LAYOUT(flightrec_markers, 32);
CHECK_LAYOUT(flightrec_marker_read, 88, offset, 16, first, 40);
static_assert(FLIGHTREC_IOC_READ_RING == 0xc070f705);
static_assert(FLIGHTREC_IOC_INFO == 0x8058f701);
// The panic region (issue 15): written by one boot, read by the next, so its
// layout is fixed for version 1.
static_assert(FLIGHTREC_PANIC_VERSION == 1);
CHECK_LAYOUT(flightrec_panic_header, 608,
             boot_id, 32, panic_msg, 176, cpu_off, 432, rec_off, 536, header_crc, 600);
CHECK_LAYOUT(flightrec_panic_cpu, 112, records, 80, data_crc, 104);
CHECK_LAYOUT(flightrec_panic_module, 72);
CHECK_LAYOUT(flightrec_panic_info, 64);
CHECK_LAYOUT(flightrec_panic_read, 48);

int main() { return 0; }
