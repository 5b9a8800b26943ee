// SHA-256 (OpenSSL's libcrypto) of bytes and of files: the records'
// content checksum in the fleet index, and the crash signature's hash.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace flightrec::fleet {

// 64 lowercase hex digits.
std::string Sha256Hex(std::string_view bytes);
// Streams the file (any size, bounded memory); errors name the file.
StatusOr<std::string> Sha256FileHex(const std::string& path);

}  // namespace flightrec::fleet
