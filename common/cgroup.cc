#include "common/cgroup.h"

#include <algorithm>
#include <array>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/checked_json.h"

namespace flightrec::cgroup {
namespace {

// The longest unit name systemd accepts (UNIT_NAME_MAX, src/basic/unit-name.h).
constexpr size_t kMaxUnit = 256;

// The next '/'-separated component of `path` at *pos ("" for an empty one).
std::string_view NextComponent(std::string_view path, size_t* pos) {
  size_t slash = path.find('/', *pos);
  std::string_view part = path.substr(*pos, slash - *pos);
  *pos = slash == std::string_view::npos ? path.size() : slash + 1;
  return part;
}

bool IsHexId(std::string_view s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

// A Kubernetes pod UID as a cgroup name spells it: a UUID (the API server's),
// or 32 hex digits (kubelet's hash for a static pod); the systemd driver
// writes its dashes as '_' because '-' nests slices.
bool ToPodUid(std::string_view s, std::string* uid) {
  if (s.size() < 32 || s.size() > 36) return false;
  if (s.find_first_not_of("0123456789abcdef-_") != std::string_view::npos) return false;
  uid->assign(s);
  std::replace(uid->begin(), uid->end(), '_', '-');
  return true;
}

// The container engines' names for a container's cgroup: "<prefix><64 hex>"
// with ".scope" under systemd. The engines' monitor processes
// (crio-conmon-<id>, libpod-conmon-<id>) have no 64-hex id there and are
// no container.
struct Prefix {
  std::string_view prefix;
  std::string_view runtime;
};
constexpr std::array<Prefix, 5> kPrefixes{{
    {"docker-", "docker"},              // docker, systemd driver (runc's systemd cgroup manager)
    {"cri-containerd-", "containerd"},  // containerd's CRI plugin, systemd driver
    {"crio-", "cri-o"},                 // cri-o, both drivers
    {"libpod-", "podman"},              // podman, both drivers
    {"containerd-", "containerd"},      // containerd without CRI (ctr), systemd driver
}};

struct Found {
  std::string runtime, id, pod_uid, qos;
};

// A systemd-driver pod slice: kubepods[-<qos>]-pod<uid>.slice, with kubelet's
// cgroup root's own prefix before it when it has one (kubelet-kubepods-...).
bool SystemdPodSlice(std::string_view part, Found* f) {
  if (!part.ends_with(".slice")) return false;
  part.remove_suffix(6);
  size_t at = part.rfind("-pod");
  if (at == std::string_view::npos || !ToPodUid(part.substr(at + 4), &f->pod_uid)) return false;
  std::string_view head = part.substr(0, at);
  if (head.ends_with("-burstable")) {
    f->qos = "burstable";
  } else if (head.ends_with("-besteffort")) {
    f->qos = "besteffort";
  } else {
    f->qos = "guaranteed";  // kubelet gives guaranteed pods no QoS slice
  }
  return head.find("kubepods") != std::string_view::npos;
}

// What one cgroup path shows of a container and a pod: the deepest container
// name, the pod slice or directory above it.
Found FromPath(std::string_view path) {
  Found f;
  std::string_view parent, grandparent;
  for (size_t pos = 0; pos < path.size();) {
    std::string_view part = NextComponent(path, &pos);
    if (part.empty()) continue;
    std::string_view name = part.ends_with(".scope") ? part.substr(0, part.size() - 6) : part;
    bool matched = false;
    for (const Prefix& p : kPrefixes) {
      if (name.starts_with(p.prefix) && IsHexId(name.substr(p.prefix.size()))) {
        f.runtime = p.runtime;
        f.id = name.substr(p.prefix.size());
        matched = true;
        break;
      }
    }
    if (!matched && IsHexId(part)) {
      // docker's cgroupfs driver: /docker/<id>; kubelet's cgroupfs driver:
      // /kubepods/<qos>/pod<uid>/<id>, whose engine the path does not name.
      f.runtime = parent == "docker" ? "docker" : "";
      f.id = part;
    } else if (!matched && part.starts_with("pod") &&
               (parent == "kubepods" ||
                (grandparent == "kubepods" && (parent == "burstable" || parent == "besteffort")))) {
      if (ToPodUid(part.substr(3), &f.pod_uid)) {
        f.qos = parent == "kubepods" ? "guaranteed" : std::string(parent);
      }
    } else if (!matched) {
      Found pod;
      if (SystemdPodSlice(part, &pod)) {
        f.pod_uid = std::move(pod.pod_uid);
        f.qos = std::move(pod.qos);
      }
    }
    grandparent = parent;
    parent = part;
  }
  return f;
}

struct Line {
  std::string_view controllers;  // "" for the unified hierarchy
  std::string_view path;
};

std::vector<Line> Lines(std::string_view text) {
  std::vector<Line> lines;
  std::string_view rest = text;
  for (size_t n = 0; n < kMaxLines && !rest.empty(); ++n) {
    size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    size_t c1 = line.find(':');
    size_t c2 = c1 == std::string_view::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    std::string_view path = line.substr(c2 + 1);
    if (!path.starts_with('/') || path.size() > kMaxPath) continue;
    std::string_view id = line.substr(0, c1);
    std::string_view controllers = line.substr(c1 + 1, c2 - c1 - 1);
    // Only hierarchy 0 is the unified one, and it alone has no controllers.
    if ((id == "0") != controllers.empty()) continue;
    lines.push_back({controllers, path});
  }
  return lines;
}

bool HasController(std::string_view controllers, std::string_view name) {
  for (size_t pos = 0; pos <= controllers.size();) {
    size_t comma = controllers.find(',', pos);
    if (controllers.substr(pos, comma - pos) == name) return true;
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return false;
}

}  // namespace

std::string UnitOfPath(std::string_view path) {
  for (size_t pos = 0; pos < path.size();) {
    std::string_view part = NextComponent(path, &pos);
    if (part.empty() || part.ends_with(".slice")) continue;
    // Only what systemd could have named a unit; a delegated subtree below
    // the unit is its user's choice and never reached.
    bool valid = part.size() <= kMaxUnit && part.find('.') != std::string_view::npos &&
                 part.find_first_not_of(
                     "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                     "0123456789:-_.\\@") == std::string_view::npos;
    return valid ? std::string(part) : "";
  }
  return "";
}

CgroupInfo ParseProcCgroup(std::string_view proc_cgroup) {
  std::vector<Line> lines = Lines(proc_cgroup);
  // Preference order: unified, name=systemd, memory; a root path only when
  // every one of them is at the root.
  const Line* best = nullptr;
  int best_rank = 4;
  for (const Line& l : lines) {
    int rank = l.controllers.empty()                          ? 0
               : HasController(l.controllers, "name=systemd") ? 1
               : HasController(l.controllers, "memory")       ? 2
                                                              : 4;
    if (rank == 4) continue;
    if (l.path != "/") rank -= 4;  // any non-root path beats every root one
    if (rank < best_rank) best = &l, best_rank = rank;
  }
  CgroupInfo info;
  if (best == nullptr) return info;
  info.path = best->path;
  info.unit = UnitOfPath(best->path);
  // The container and pod from the chosen path, else from any hierarchy
  // that shows them (an engine on a v1 machine may skip name=systemd).
  Found f = FromPath(best->path);
  for (size_t i = 0; i < lines.size() && f.id.empty() && f.pod_uid.empty(); ++i) {
    f = FromPath(lines[i].path);
  }
  info.container_runtime = std::move(f.runtime);
  info.container_id = std::move(f.id);
  info.pod_uid = std::move(f.pod_uid);
  info.qos = std::move(f.qos);
  return info;
}

void AddCgroupToJson(const CgroupInfo& c, nlohmann::json* obj) {
  nlohmann::json& o = *obj;
  // A cgroup's name is its creator's bytes; the others are checked shapes.
  if (!c.path.empty()) json::SetText(o, "cgroup", c.path);
  auto put = [&](const char* key, const std::string& v) {
    if (!v.empty()) o[key] = v;
  };
  put("unit", c.unit);
  put("container_runtime", c.container_runtime);
  put("container_id", c.container_id);
  put("pod_uid", c.pod_uid);
  put("pod_qos", c.qos);
}

CgroupInfo CgroupFromJson(const nlohmann::json& obj) {
  CgroupInfo c;
  c.path = json::RawText(obj, "cgroup");
  c.unit = json::Str(obj, "unit");
  c.container_runtime = json::Str(obj, "container_runtime");
  c.container_id = json::Str(obj, "container_id");
  c.pod_uid = json::Str(obj, "pod_uid");
  c.qos = json::Str(obj, "pod_qos");
  return c;
}

}  // namespace flightrec::cgroup
