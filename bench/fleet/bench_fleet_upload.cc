// Uploads one file with the fleet S3 client (what the shipper does for a
// record) and prints "bytes seconds MiB/s". The gateway and credentials come
// from the environment (FLEET_S3_ENDPOINT, FLEET_S3_BUCKET, FLEET_S3_REGION,
// FLEET_S3_ACCESS_KEY, FLEET_S3_SECRET_KEY), never from the command line.
// Usage: bench_fleet_upload FILE KEY   (bench/fleet/bench_fleet.sh runs it)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "recorder/fleet/s3_client.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: bench_fleet_upload FILE KEY\n");
    return 2;
  }
  auto env = [](const char* k) {
    const char* v = std::getenv(k);
    return std::string(v ? v : "");
  };
  flightrec::fleet::S3Options o;
  o.endpoint = env("FLEET_S3_ENDPOINT");
  o.bucket = env("FLEET_S3_BUCKET");
  o.region = env("FLEET_S3_REGION").empty() ? "us-east-1" : env("FLEET_S3_REGION");
  o.access_key = env("FLEET_S3_ACCESS_KEY");
  o.secret_key = env("FLEET_S3_SECRET_KEY");
  auto s3 = flightrec::fleet::S3Client::Create(o);
  if (!s3.ok()) {
    std::fprintf(stderr, "bench_fleet_upload: %s\n", s3.status().message().c_str());
    return 1;
  }
  auto t0 = std::chrono::steady_clock::now();
  // The whole upload as the shipper pays it: the digest pass included.
  flightrec::Status st = (*s3)->PutFile(argv[2], argv[1]);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!st.ok()) {
    std::fprintf(stderr, "bench_fleet_upload: %s\n", st.message().c_str());
    return 1;
  }
  uint64_t bytes = std::filesystem::file_size(argv[1]);
  std::printf("%llu %.3f %.1f\n", static_cast<unsigned long long>(bytes), s,
              static_cast<double>(bytes) / s / (1 << 20));
  return 0;
}
