// bench_store_write: store write throughput vs. the zstd CLI, side by side in
// one run, on the same input at the same level.
//
//   bench_store_write [--size BYTES] [--level N] [--input FILE] [--dir DIR]
//
// Without --input it builds a core-like mix of SIZE bytes (default 1 GiB):
// ELF code and data from /usr/lib and /usr/bin, text from /usr/share, and
// zero pages, in the proportions a process image has (a core file is mostly
// mapped libraries, heap and zero-filled regions). Each contender is timed
// twice in alternating order; the best run counts. Prints throughput (input
// MB/s), compression ratio and the store/zstd throughput ratio.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "store/store.h"

namespace fs = std::filesystem;
using flightrec::store::Store;
using flightrec::store::StoreOptions;

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void BuildInput(const std::string& path, uint64_t size) {
  std::vector<std::string> files;
  for (const char* root : {"/usr/lib/x86_64-linux-gnu", "/usr/bin", "/usr/share/doc"}) {
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(
             root, fs::directory_options::skip_permission_denied, ec);
         it != fs::recursive_directory_iterator() && files.size() < 4000; it.increment(ec)) {
      if (ec) break;
      if (it->is_regular_file(ec) && !it->is_symlink(ec) && it->file_size(ec) > 4096) {
        files.push_back(it->path().string());
      }
    }
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  std::string zeros(1 << 20, '\0');
  uint64_t written = 0;
  size_t i = 0;
  std::vector<char> buf;
  while (written < size && !files.empty()) {
    // One zero MiB for every ~3 MiB of file content: heap and stack regions
    // of a core are largely untouched pages.
    if (i % 4 == 3) {
      uint64_t n = std::min<uint64_t>(zeros.size(), size - written);
      out.write(zeros.data(), static_cast<std::streamsize>(n));
      written += n;
    } else {
      std::ifstream in(files[i % files.size()], std::ios::binary);
      buf.assign(std::istreambuf_iterator<char>(in), {});
      uint64_t n = std::min<uint64_t>(buf.size(), size - written);
      out.write(buf.data(), static_cast<std::streamsize>(n));
      written += n;
    }
    ++i;
  }
}

struct Result {
  double seconds = 1e9;
  uint64_t out_bytes = 0;
};

Result TimeStore(const std::string& input, const std::string& dir, int level, int workers) {
  fs::remove_all(dir);
  StoreOptions opts;
  opts.apply_retention_on_commit = false;
  opts.writer.level = level;
  opts.writer.workers = workers;
  auto s = Store::Open(dir, opts);
  if (!s.ok()) {
    std::fprintf(stderr, "store: %s\n", s.status().message().c_str());
    std::exit(1);
  }
  int fd = open(input.c_str(), O_RDONLY);
  double t0 = Now();
  auto rec = (*s)->BeginRecord("crash");
  uint64_t copied = 0;
  bool truncated = false;
  auto st = (*rec)->writer().BeginSection("core");
  if (st.ok()) st = (*rec)->writer().WriteFromFd(fd, ~0ull, &copied, &truncated);
  if (st.ok()) st = (*rec)->writer().EndSection();
  auto row = st.ok() ? (*s)->Commit(std::move(*rec), {})
                     : flightrec::StatusOr<flightrec::store::RecordRow>(st);
  double t1 = Now();
  close(fd);
  if (!row.ok()) {
    std::fprintf(stderr, "store: %s\n", row.status().message().c_str());
    std::exit(1);
  }
  return {t1 - t0, row->file_size};
}

Result TimeZstd(const std::string& input, const std::string& output, int level, int threads) {
  std::string cmd = "zstd -q -" + std::to_string(level) +
                    (threads ? " -T" + std::to_string(threads) : "") + " -c '" + input + "' > '" +
                    output + "'";
  double t0 = Now();
  // zstd's output file is fsynced too, so both sides pay for durability.
  int rc = std::system((cmd + " && sync -f '" + output + "'").c_str());
  double t1 = Now();
  if (rc != 0) {
    std::fprintf(stderr, "zstd failed (is the zstd package installed?)\n");
    std::exit(1);
  }
  return {t1 - t0, static_cast<uint64_t>(fs::file_size(output))};
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t size = 1ull << 30;
  int level = 3;
  std::string input, dir = (fs::temp_directory_path() / "flightrec-bench-store").string();
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--size")
      size = std::stoull(argv[i + 1]);
    else if (a == "--level")
      level = std::stoi(argv[i + 1]);
    else if (a == "--input")
      input = argv[i + 1];
    else if (a == "--dir")
      dir = argv[i + 1];
    else {
      std::fprintf(
          stderr,
          "usage: bench_store_write [--size BYTES] [--level N] [--input FILE] [--dir DIR]\n");
      return 2;
    }
  }
  fs::create_directories(dir);
  bool own_input = input.empty();
  if (own_input) {
    input = dir + "/input.bin";
    BuildInput(input, size);
  }
  size = fs::file_size(input);
  {  // warm the page cache so both sides read from memory
    std::ifstream in(input, std::ios::binary);
    std::vector<char> buf(1 << 20);
    while (in.read(buf.data(), static_cast<std::streamsize>(buf.size()))) {
    }
  }
  Result store_mt, store_st, zstd1, zstdT2;
  for (int round = 0; round < 2; ++round) {
    auto a = TimeZstd(input, dir + "/out.zst", level, 0);
    auto b = TimeStore(input, dir + "/store", level, 2);
    auto c = TimeZstd(input, dir + "/out.zst", level, 2);
    auto d = TimeStore(input, dir + "/store", level, 0);
    if (a.seconds < zstd1.seconds) zstd1 = a;
    if (b.seconds < store_mt.seconds) store_mt = b;
    if (c.seconds < zstdT2.seconds) zstdT2 = c;
    if (d.seconds < store_st.seconds) store_st = d;
  }
  auto mbps = [&](const Result& r) { return size / r.seconds / 1e6; };
  auto ratio = [&](const Result& r) { return static_cast<double>(size) / r.out_bytes; };
  std::printf("input: %s, %.1f MiB\n",
              own_input ? "core-like mix (ELF, text, zero pages)" : input.c_str(),
              size / 1048576.0);
  std::printf("%-34s %10s %8s\n", ("contender (level " + std::to_string(level) + ")").c_str(),
              "MB/s", "ratio");
  std::printf("%-34s %10.1f %8.3f\n", "zstd CLI -c (default threads)", mbps(zstd1), ratio(zstd1));
  std::printf("%-34s %10.1f %8.3f\n", "zstd CLI -T2", mbps(zstdT2), ratio(zstdT2));
  std::printf("%-34s %10.1f %8.3f\n", "flightrec store (2 workers)", mbps(store_mt),
              ratio(store_mt));
  std::printf("%-34s %10.1f %8.3f\n", "flightrec store (single thread)", mbps(store_st),
              ratio(store_st));
  std::printf("store(2 workers) / zstd CLI throughput: %.2fx (goal >= 0.90x)\n",
              mbps(store_mt) / mbps(zstd1));
  std::printf("store(2 workers) / zstd -T2 throughput: %.2fx\n", mbps(store_mt) / mbps(zstdT2));
  std::printf("store(1 thread) / zstd CLI throughput: %.2fx\n", mbps(store_st) / mbps(zstd1));
  fs::remove_all(dir + "/store");
  fs::remove(dir + "/out.zst");
  if (own_input) fs::remove(input);
  return 0;
}
