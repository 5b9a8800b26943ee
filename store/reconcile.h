// Store::DirChange: how the store's own changes to its directories keep the
// stamp of the last reconcile (store/reconcile.cc says why and how).
#pragma once

#include <string>
#include <vector>

#include "store/store.h"

namespace flightrec::store {

// Names in the directory `fd` (not consumed, its offset rewound), sorted,
// without "." and "..".
StatusOr<std::vector<std::string>> ListDir(int fd, const std::string& display);

// One change (or several) to the store's directories by this store, under
// the lock. Each change: Before(), the change, Changed(); then Commit() once
// the index agrees with the directory. The stamp moves on only if the
// directory matched it before every change (nobody else changed it).
class Store::DirChange {
 public:
  explicit DirChange(Store& s) : s_(s) {
    if (s_.locked_) return;  // nested in a change that holds the lock
    owner_ = s_.LockDir();
    if (!owner_) return;
    auto stored = s_.index_->GetReconciled();
    if (!stored.ok() || !stored->has_value()) return;
    expected_ = (*stored)->stamp;
    full_ns_ = (*stored)->full_ns;
    chained_ = true;
  }
  ~DirChange() {
    if (owner_) s_.UnlockDir();
  }
  DirChange(const DirChange&) = delete;
  DirChange& operator=(const DirChange&) = delete;

  void Before() {
    if (!chained_) return;
    auto now = s_.DirStamp();
    chained_ = now.ok() && *now == expected_;
  }
  void Changed() {
    if (!chained_) return;
    s_.MarkDirs();
    auto now = s_.DirStamp();
    if (now.ok())
      expected_ = *now;
    else
      chained_ = false;
  }
  void Commit() {
    if (chained_) (void)s_.index_->SetReconciled(Index::Reconciled{expected_, full_ns_});
  }

 private:
  Store& s_;
  bool owner_ = false;
  bool chained_ = false;
  std::string expected_;
  int64_t full_ns_ = 0;
};

}  // namespace flightrec::store
