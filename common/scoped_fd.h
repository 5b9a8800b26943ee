// RAII owners for kernel resources: no class in flightrec holds a raw fd or
// mapping. Move-only; the destructor closes/unmaps.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <utility>

namespace flightrec {

class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(ScopedFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  ScopedFd& operator=(ScopedFd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

class ScopedMmap {
 public:
  ScopedMmap() = default;
  ScopedMmap(void* addr, size_t len) : addr_(addr), len_(len) {}
  ScopedMmap(ScopedMmap&& o) noexcept
      : addr_(std::exchange(o.addr_, nullptr)), len_(std::exchange(o.len_, 0)) {}
  ScopedMmap& operator=(ScopedMmap&& o) noexcept {
    if (this != &o) {
      reset();
      addr_ = std::exchange(o.addr_, nullptr);
      len_ = std::exchange(o.len_, 0);
    }
    return *this;
  }
  ScopedMmap(const ScopedMmap&) = delete;
  ScopedMmap& operator=(const ScopedMmap&) = delete;
  ~ScopedMmap() { reset(); }

  void* data() const { return addr_; }
  size_t size() const { return len_; }
  bool valid() const { return addr_ != nullptr; }
  void reset() {
    if (addr_ != nullptr) ::munmap(addr_, len_);
    addr_ = nullptr;
    len_ = 0;
  }

 private:
  void* addr_ = nullptr;
  size_t len_ = 0;
};

}  // namespace flightrec
