// The uapi header is an ABI: these asserts fail the build when a field
// moves, and the test also proves the header compiles as C++20.
#include <cstddef>

#include "module/uapi/flightrec.h"

#define CHECK_OFF(type, field, off) static_assert(offsetof(type, field) == (off), #type "." #field)

static_assert(sizeof(flightrec_sample) == 64);  // DATA record header; frames follow
CHECK_OFF(flightrec_sample, size, 0);
CHECK_OFF(flightrec_sample, type, 4);
CHECK_OFF(flightrec_sample, flags, 6);
CHECK_OFF(flightrec_sample, time_ns, 8);
CHECK_OFF(flightrec_sample, seq, 32);
CHECK_OFF(flightrec_sample, aux_len, 40);
CHECK_OFF(flightrec_sample, mode, 56);
CHECK_OFF(flightrec_sample, abi, 62);
static_assert(FLIGHTREC_SAMPLE_MAX_SIZE == 512);
static_assert(FLIGHTREC_DATA_CHUNK == 4096);
static_assert(sizeof(flightrec_aux) == 216);
CHECK_OFF(flightrec_aux, regs, 24);
static_assert(sizeof(flightrec_sideband) == 512);
CHECK_OFF(flightrec_sideband, dev, 48);
CHECK_OFF(flightrec_sideband, path, 88);
static_assert(sizeof(flightrec_info) == 88);
CHECK_OFF(flightrec_info, period, 32);
CHECK_OFF(flightrec_info, markers_per_uid, 68);
CHECK_OFF(flightrec_info, reserved, 72);
static_assert(sizeof(flightrec_cpu_stats) == 104);
CHECK_OFF(flightrec_cpu_stats, produced, 8);
CHECK_OFF(flightrec_cpu_stats, data_head, 72);
CHECK_OFF(flightrec_cpu_stats, handler_ns, 88);
CHECK_OFF(flightrec_cpu_stats, reserved, 96);
static_assert(sizeof(flightrec_stats) == 64);
CHECK_OFF(flightrec_stats, sideband_written, 16);
CHECK_OFF(flightrec_stats, crash_hook, 48);
CHECK_OFF(flightrec_stats, crash_hook_error, 52);
CHECK_OFF(flightrec_stats, markers_coalesced, 56);
CHECK_OFF(flightrec_stats, markers_uid_limited, 60);
static_assert(sizeof(flightrec_cpu_stats_ev) == 152);
CHECK_OFF(flightrec_cpu_stats_ev, s, 0);
CHECK_OFF(flightrec_cpu_stats_ev, event_state, 104);
CHECK_OFF(flightrec_cpu_stats_ev, throttled, 112);
CHECK_OFF(flightrec_cpu_stats_ev, time_running, 128);
static_assert(sizeof(flightrec_read) == 112);
CHECK_OFF(flightrec_read, from, 8);
CHECK_OFF(flightrec_read, first, 40);
CHECK_OFF(flightrec_read, flags, 88);
CHECK_OFF(flightrec_read, reserved, 96);
static_assert(sizeof(flightrec_marker) == 56);
CHECK_OFF(flightrec_marker, slot, 16);
CHECK_OFF(flightrec_marker, nr_cpus, 32);
CHECK_OFF(flightrec_marker, cpu, 36);
CHECK_OFF(flightrec_marker, hook_ns, 40);
CHECK_OFF(flightrec_marker, copied_bytes, 48);
static_assert(FLIGHTREC_SAMPLE_CRASH == 8);
static_assert(FLIGHTREC_VERSION == 2);
static_assert(sizeof(flightrec_markers) == 32);
static_assert(sizeof(flightrec_marker_read) == 88);
CHECK_OFF(flightrec_marker_read, offset, 16);
CHECK_OFF(flightrec_marker_read, first, 40);
static_assert(FLIGHTREC_IOC_READ_RING == 0xc070f705);
static_assert(FLIGHTREC_IOC_INFO == 0x8058f701);
// The panic region (issue 15): written by one boot, read by the next, so its
// layout is fixed for version 1.
static_assert(FLIGHTREC_PANIC_VERSION == 1);
static_assert(sizeof(flightrec_panic_header) == 608);
CHECK_OFF(flightrec_panic_header, boot_id, 32);
CHECK_OFF(flightrec_panic_header, panic_msg, 176);
CHECK_OFF(flightrec_panic_header, cpu_off, 432);
CHECK_OFF(flightrec_panic_header, rec_off, 536);
CHECK_OFF(flightrec_panic_header, header_crc, 600);
static_assert(sizeof(flightrec_panic_cpu) == 112);
CHECK_OFF(flightrec_panic_cpu, records, 80);
CHECK_OFF(flightrec_panic_cpu, data_crc, 104);
static_assert(sizeof(flightrec_panic_module) == 72);
static_assert(sizeof(flightrec_panic_info) == 64);
static_assert(sizeof(flightrec_panic_read) == 48);

int main() { return 0; }
