// What a process's /proc/PID/cgroup text says about where it runs: its
// cgroup, its systemd unit, the container and Kubernetes pod it belongs to.
// Pure parsing of text the kernel wrote from names anyone who may create a
// cgroup chose, so every field is checked against the shape its owner
// (systemd, a container engine, kubelet) gives it, and a name that does not
// have that shape yields nothing instead of attacker text in a label.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace flightrec::cgroup {

// Longer /proc/PID/cgroup texts are read up to these bounds and the rest is
// ignored: a v1 machine lists one line per hierarchy (about 13), a path is at
// most PATH_MAX below the mount point.
inline constexpr size_t kMaxLines = 64;
inline constexpr size_t kMaxPath = 4096;

struct CgroupInfo {
  // The path in the hierarchy that says most: the unified (v2, "0::") one,
  // else systemd's own v1 hierarchy (name=systemd), else the memory
  // controller's; one that is the root ("/") only when all of them are. A
  // hybrid or v1 machine lists the unified hierarchy at its root for
  // processes no one placed there (the container engines of such machines
  // write the v1 hierarchies). "" when the text names none.
  std::string path;
  // The systemd unit or scope (nginx.service, session-2.scope,
  // docker-<id>.scope), as systemd's cg_path_get_unit finds it: the first
  // path component that is no slice. "" when there is none.
  std::string unit;
  // docker, containerd, cri-o or podman; "" when the path shows a container
  // but not whose (kubelet's cgroupfs driver names only the id).
  std::string container_runtime;
  std::string container_id;  // 64 lowercase hex digits, "" none
  std::string pod_uid;       // Kubernetes pod UID ("-" separated), "" none
  std::string qos;           // the pod's QoS class: guaranteed, burstable, besteffort
};

// Parses a /proc/PID/cgroup text: v1 ("N:controllers:/path" per hierarchy),
// v2 ("0::/path") or hybrid (both). Never fails: what it cannot read stays "".
CgroupInfo ParseProcCgroup(std::string_view proc_cgroup);

// The known fields as keys of a JSON object (a record's meta.processes
// entry, docs/FORMAT.md): cgroup (and cgroup_hex), unit, container_runtime,
// container_id, pod_uid, pod_qos; unknown ones are left out.
void AddCgroupToJson(const CgroupInfo& c, nlohmann::json* obj);
// The inverse, from untrusted JSON: absent or mistyped keys read as "".
CgroupInfo CgroupFromJson(const nlohmann::json& obj);

// The unit of one cgroup path (the first component that is no slice and has a
// unit's name), "" when none: ParseProcCgroup(text).unit for one path.
std::string UnitOfPath(std::string_view path);

}  // namespace flightrec::cgroup
