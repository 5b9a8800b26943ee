// The fleet index's schema, as migrations (docs/FLEET.md, "Schema"). A
// migration, once released, is never edited: a change is a new migration.
#pragma once

#include <vector>

#include "recorder/fleet/fleet_index.h"

namespace flightrec::fleet {

// Partitioned by month on created_at (the time in the record id); their
// partitions are created on demand by FleetIndex (name_yYYYYmMM).
inline constexpr const char* kPgPartitionedTables[] = {"records", "crashes", "crash_processes"};

inline const std::vector<Migration>& PgSchemaMigrations() {
  static const std::vector<Migration> kMigrations = {
      {1, "hosts, records, crashes, processes, build-ids, signatures",
       R"sql(
CREATE TABLE hosts (
  host_id    text PRIMARY KEY,
  first_seen timestamptz NOT NULL DEFAULT now()
);
-- One row per executable build seen in a crash: symbolization looks binaries
-- up by build-id.
CREATE TABLE build_ids (
  build_id   text PRIMARY KEY,
  executable text NOT NULL,
  first_seen timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE signatures (
  signature_id text PRIMARY KEY,
  title        text NOT NULL,
  frames       jsonb NOT NULL,
  first_seen   timestamptz NOT NULL DEFAULT now()
);
-- created_at is the UTC second in the record id: the partition key, part of
-- every key because PostgreSQL's unique constraints on a partitioned table
-- must include it; equal for every retry of one record, so
-- (host_id, record_id) stays unique.
CREATE TABLE records (
  host_id    text NOT NULL REFERENCES hosts,
  record_id  text NOT NULL,
  created_at timestamptz NOT NULL,
  time_ns    bigint NOT NULL,
  kind       text NOT NULL,
  object_key text NOT NULL,
  sha256     text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
  bytes      bigint NOT NULL CHECK (bytes >= 0),
  indexed_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (host_id, record_id, created_at)
) PARTITION BY RANGE (created_at);
-- `crash info ID` and fetches look records up by id (or a prefix of one).
CREATE INDEX records_record_id ON records (record_id text_pattern_ops);
CREATE TABLE crashes (
  host_id      text NOT NULL,
  record_id    text NOT NULL,
  created_at   timestamptz NOT NULL,
  time_ns      bigint NOT NULL,
  pid          bigint NOT NULL,
  comm         text NOT NULL,
  signal       integer NOT NULL,
  signal_name  text NOT NULL,
  executable   text NOT NULL,
  build_id     text REFERENCES build_ids,
  signature_id text NOT NULL REFERENCES signatures,
  PRIMARY KEY (host_id, record_id, created_at),
  FOREIGN KEY (host_id, record_id, created_at) REFERENCES records ON DELETE CASCADE
) PARTITION BY RANGE (created_at);
CREATE INDEX crashes_signature ON crashes (signature_id, created_at);
CREATE INDEX crashes_record_id ON crashes (record_id text_pattern_ops);
CREATE TABLE crash_processes (
  host_id    text NOT NULL,
  record_id  text NOT NULL,
  created_at timestamptz NOT NULL,
  ord        integer NOT NULL,
  pid        bigint NOT NULL,
  comm       text NOT NULL,
  executable text NOT NULL,
  build_id   text REFERENCES build_ids,
  PRIMARY KEY (host_id, record_id, created_at, ord),
  FOREIGN KEY (host_id, record_id, created_at) REFERENCES crashes ON DELETE CASCADE
) PARTITION BY RANGE (created_at);
)sql"},
      {2, "crash lists by time and by host",
       R"sql(
CREATE INDEX crashes_time ON crashes (created_at, time_ns);
CREATE INDEX crashes_host_time ON crashes (host_id, created_at);
)sql"},
      {3, "where each crashed process ran: cgroup, unit, container, pod",
       R"sql(
ALTER TABLE crashes ADD COLUMN cgroup text, ADD COLUMN unit text,
  ADD COLUMN container_runtime text, ADD COLUMN container_id text, ADD COLUMN pod_uid text;
ALTER TABLE crash_processes ADD COLUMN cgroup text, ADD COLUMN unit text,
  ADD COLUMN container_runtime text, ADD COLUMN container_id text, ADD COLUMN pod_uid text;
-- `fleet crash list --unit/--container`: a service's or a container's crashes.
CREATE INDEX crashes_unit ON crashes (unit, created_at);
CREATE INDEX crashes_container ON crashes (container_id text_pattern_ops);
)sql"},
  };
  return kMigrations;
}

}  // namespace flightrec::fleet
