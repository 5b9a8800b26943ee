// `recorder crash list` rows and `recorder crash info` for records of kind
// `panic` (a kernel panic's history, kept across the reboot by flightrec.ko
// and stored by recorderd at the next start; docs/FORMAT.md).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "store/record_file.h"

namespace flightrec::recorder::cli {

// The crash list's cells (ID, KIND, TIME, PID, UID, SIG, EXE, CORE, HISTORY)
// for a panic, from its index metadata; FormatTable escapes them.
std::vector<std::string> PanicListCells(const std::string& id, int64_t created_ns,
                                        const nlohmann::json& meta);
// The crash list's JSON object for a panic.
nlohmann::json PanicListJson(const std::string& id, int64_t created_ns, uint64_t stored_bytes,
                             const nlohmann::json& meta);

// The panic message, the crashed boot, what was damaged, the panicking CPU's
// last stacks, a per-CPU timeline up to the panic and each CPU's top
// functions in the last second before it. Everything is read from the
// record through checked accessors: a hostile record prints what it can.
Status PrintPanicInfo(const std::string& id, const store::RecordReader& reader, bool as_json,
                      int bins);

}  // namespace flightrec::recorder::cli
