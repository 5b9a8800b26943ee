// The fuzz harness's second input form: a kernel panic region
// (module/uapi/flightrec.h, "FRPANIC\0"), validated and built into a panic
// record's dump as recorderd does at start. Apart from record_decode (the
// query side, which may not link a capture backend: link_interface_test),
// because the region's parser and the dump builder live in recorder/module/.
#pragma once

#include <cstddef>
#include <cstdint>

namespace flightrec::fuzz {

// Decodes `data` as a panic region when it starts with the region's magic,
// else as a record (DecodeRecordBytes). Never throws on purpose.
void DecodeInput(const uint8_t* data, size_t size, bool every_variant = true);

// The region: checksums recomputed over whatever its offsets name (three
// inputs in four, by a hash of the bytes, so mutations reach the per-part
// checks and the dump builder rather than stopping at the header's CRC), then
// ParsePanicRegion and BuildPanicDump with a synthetic kernel of the same
// release or another.
void DecodePanicRegion(const uint8_t* data, size_t size);

}  // namespace flightrec::fuzz
