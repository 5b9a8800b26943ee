// The one attribution pipeline (docs/ARCHITECTURE.md, seed 000's dcookies):
//
//   events ──▶ ProcessTable ──▶ ip → (file cookie, file offset) ──▶ Symbolizer
//
// Attributor consumes an event stream in time order — live from a backend or
// replayed from a stored record, through the same code — and turns every
// sample's instruction pointers into (cookie, offset) pairs using the
// mappings known at the sample's time. A cookie names a file by identity
// (build-id, path, device/inode), so a record stays meaningful after the
// process, its libraries or the binary on disk are gone or replaced. Symbols
// are looked up later, at query time, from (build-id, offset).
//
// Thread: an Attributor and a Symbolizer are used by one thread each.
//
// The pieces, one file each: cookie_table.h (file identities), process_table.h
// (processes and mappings), sideband_history.h (the window's sideband),
// proc_scan.h (/proc at start), kernel_symbols.h and attributor.h (samples to
// frames). Symbolization is recorder/symbolize/.
#pragma once

#include "recorder/attribution/attributor.h"
#include "recorder/attribution/cookie_table.h"
#include "recorder/attribution/kernel_symbols.h"
#include "recorder/attribution/proc_scan.h"
#include "recorder/attribution/process_table.h"
#include "recorder/attribution/sideband_history.h"
