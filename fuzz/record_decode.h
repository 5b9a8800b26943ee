// The fuzz harness's entry: decode one record given as bytes through every
// path a query command takes (docs/FORMAT.md promises a bad record gives an
// error, "never a crash"). Built into the libFuzzer target (scripts/fuzz.sh)
// and into a plain gtest that replays the seed and regression corpora, so a
// regression is caught by ctest without clang.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace flightrec::fuzz {

// Input forms (told apart by the first bytes):
//  * a record file ("FLTREC\r\n..."): its header checksum, table-of-contents
//    checksum and every section's XXH3 are recomputed first, so that
//    mutations reach the decoders instead of the checksum checks;
//  * an unpacked record ("FRFUZZ1\n" + entries, see PackUnpacked): a header,
//    the meta JSON and each section's raw bytes, written into a valid record
//    with the real RecordWriter, so mutations land in the decompressed bytes
//    (events, JSON sections, kallsyms) rather than in zstd frames.
// Then: open → verify → replay (re-attributed and live) → report, script,
// timeline → every export format → crash list and crash info. Output goes to
// stdout (the caller points it at /dev/null). Never throws on purpose: an
// exception escaping here is a finding.
// every_variant runs each command in every output variant (~25 replays of
// the record: the corpus test); without it, one variant per command group,
// chosen by a hash of the input (~4 replays: the fuzzer, for exec/s), so
// that over a run every variant is taken.
void DecodeRecordBytes(const uint8_t* data, size_t size, bool every_variant = true);

// The record file the harness decodes for an input (either form), "" when
// it makes none: lets a finding be put in a store and tried with `recorder`.
std::string RecordFileFor(std::string_view input);

// The unpacked form of a record file (for seeds): sections larger than
// max_section_bytes are cut (kallsyms keeps whole lines).
std::string UnpackRecordFile(const std::string& path, size_t max_section_bytes, bool* ok);

inline constexpr std::string_view kUnpackedMagic = "FRFUZZ1\n";

}  // namespace flightrec::fuzz
