// store_stress_helper: a child process for the store's crash and concurrency
// tests. It writes records into a store in a loop and, after each commit
// returns, appends the record id to a journal file and fsyncs it — so the
// parent knows exactly which records were committed before it killed us.
//
//   store_stress_helper write STORE JOURNAL COUNT [PAYLOAD_BYTES]
//   store_stress_helper read STORE SECONDS_BUDGET   (reads and verifies all records repeatedly)
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "store/store.h"

using flightrec::store::Store;
using flightrec::store::StoreOptions;

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: see the comment at the top of store_stress_helper.cc\n");
    return 2;
  }
  std::string mode = argv[1];
  StoreOptions opts;
  opts.apply_retention_on_commit = false;
  opts.writer.workers = 0;
  auto s = Store::Open(argv[2], opts);
  if (!s.ok()) {
    std::fprintf(stderr, "open: %s\n", s.status().message().c_str());
    return 1;
  }
  if (mode == "write") {
    int journal = open(argv[3], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (journal < 0) return 1;
    long count = argc > 4 ? std::atol(argv[4]) : 1000000;
    size_t payload = argc > 5 ? std::strtoul(argv[5], nullptr, 10) : 20000;
    std::mt19937 rng(static_cast<unsigned>(getpid()));
    for (long i = 0; i < count; ++i) {
      auto rec = (*s)->BeginRecord("dump");
      if (!rec.ok()) {
        std::fprintf(stderr, "begin: %s\n", rec.status().message().c_str());
        return 1;
      }
      std::string data(payload, '\0');
      for (auto& c : data) c = static_cast<char>('a' + rng() % 8);
      auto st = (*rec)->writer().AddSection("events", data);
      if (st.ok()) st = (*rec)->writer().AddSection("config", std::to_string(i));
      if (!st.ok()) return 1;
      auto row = (*s)->Commit(std::move(*rec), {{"reason", "stress"}, {"pid_writer", getpid()}});
      if (!row.ok()) {
        std::fprintf(stderr, "commit: %s\n", row.status().message().c_str());
        return 1;
      }
      std::string line = row->id + "\n";
      if (write(journal, line.data(), line.size()) != static_cast<ssize_t>(line.size())) return 1;
      fsync(journal);
    }
    return 0;
  }
  if (mode == "read") {
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(std::atoi(argv[3]));
    int rounds = 0;
    while (std::chrono::steady_clock::now() < until) {
      auto rows = (*s)->List({});
      if (!rows.ok()) {
        std::fprintf(stderr, "list: %s\n", rows.status().message().c_str());
        return 1;
      }
      for (const auto& r : *rows) {
        auto rd = (*s)->OpenRecord(r.id);
        flightrec::Status why = rd.ok() ? (*rd)->Verify() : rd.status();
        if (!why.ok()) {
          std::fprintf(stderr, "record %s unreadable while listed: %s\n", r.id.c_str(),
                       why.message().c_str());
          return 1;
        }
      }
      ++rounds;
    }
    return rounds > 0 ? 0 : 1;
  }
  return 2;
}
