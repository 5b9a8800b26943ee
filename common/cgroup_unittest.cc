#include "common/cgroup.h"

#include <gtest/gtest.h>

#include <string>

namespace flightrec::cgroup {
namespace {

// Container ids are 64 hex digits in every engine (docker's stringid, runc's,
// cri-o's and podman's); pod UIDs are the API server's UUIDs.
const std::string kId = "3f1a0c9d7b2e4f6a8c0e1d2b3a4f5e6d7c8b9a0f1e2d3c4b5a69788766554433";
const std::string kPod = "2c9e6a51-7b3d-4f0e-9a1c-5d8e7f6a4b3c";
const std::string kPodUnderscored = "2c9e6a51_7b3d_4f0e_9a1c_5d8e7f6a4b3c";

TEST(CgroupTest, TheUnitIsTheFirstComponentThatIsNoSlice) {
  // systemd puts system services in system.slice (systemd.special(7)).
  CgroupInfo s = ParseProcCgroup("0::/system.slice/nginx.service\n");
  EXPECT_EQ(s.path, "/system.slice/nginx.service");
  EXPECT_EQ(s.unit, "nginx.service");
  EXPECT_EQ(s.container_id, "");
  EXPECT_EQ(s.pod_uid, "");
  // systemd-logind's session scopes (systemd.special(7), user-UID.slice).
  EXPECT_EQ(ParseProcCgroup("0::/user.slice/user-1000.slice/session-2.scope\n").unit,
            "session-2.scope");
  // Below a delegated unit (user@.service delegates its subtree), names are
  // its user's: never taken for the unit.
  EXPECT_EQ(ParseProcCgroup("0::/user.slice/user-1000.slice/user@1000.service/app.slice/"
                            "evil\x1b.service\n")
                .unit,
            "user@1000.service");
  EXPECT_EQ(ParseProcCgroup("0::/\n").unit, "");
  EXPECT_EQ(ParseProcCgroup("0::/my\nunit.service\n").unit, "");
  EXPECT_EQ(ParseProcCgroup("0::/evil\x1b[2J.service\n").unit, "");
  EXPECT_EQ(ParseProcCgroup("").unit, "");
  EXPECT_EQ(UnitOfPath("/system.slice/cron.service/sub"), "cron.service");
}

TEST(CgroupTest, AV1MachineUsesSystemdsOwnHierarchyThenMemory) {
  // A legacy (v1) machine: one line per hierarchy, systemd's named one
  // holding the units (systemd's "legacy" mode, cgroup-util.c).
  CgroupInfo v1 = ParseProcCgroup(
      "12:cpu,cpuacct:/x\n4:memory:/system.slice/cron.service\n"
      "1:name=systemd:/system.slice/cron.service\n");
  EXPECT_EQ(v1.path, "/system.slice/cron.service");
  EXPECT_EQ(v1.unit, "cron.service");
  // A hybrid machine lists the unified hierarchy too, at its root.
  EXPECT_EQ(ParseProcCgroup("9:name=systemd:/system.slice/cron.service\n4:memory:/x\n0::/\n").path,
            "/system.slice/cron.service");
  // This project's CI machines: hybrid, name=systemd at the root and the
  // memory hierarchy set by the sandbox that runs the job.
  CgroupInfo ci = ParseProcCgroup(
      "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/a8b7ba7b\n3:cpuset:/\n0::/\n");
  EXPECT_EQ(ci.path, "/process_api/a8b7ba7b");
  EXPECT_EQ(ci.unit, "");
  EXPECT_EQ(ParseProcCgroup("9:name=systemd:/\n4:memory:/\n0::/\n").path, "/");
  // Pure v2 (systemd's unified mode): the one line.
  EXPECT_EQ(ParseProcCgroup("0::/system.slice/a.service\n").path, "/system.slice/a.service");
}

TEST(CgroupTest, DockerWithTheSystemdDriverIsAScopeNamedByTheId) {
  // runc's systemd cgroup manager (libcontainer/cgroups/systemd, getUnitName)
  // names the scope "<ScopePrefix>-<id>.scope", and dockerd passes the prefix
  // "docker" and the parent system.slice (daemon/oci_linux.go).
  CgroupInfo c = ParseProcCgroup("0::/system.slice/docker-" + kId + ".scope\n");
  EXPECT_EQ(c.unit, "docker-" + kId + ".scope");
  EXPECT_EQ(c.container_runtime, "docker");
  EXPECT_EQ(c.container_id, kId);
  EXPECT_EQ(c.pod_uid, "");
  EXPECT_EQ(c.qos, "");
}

TEST(CgroupTest, DockerWithTheCgroupfsDriverIsADirectoryUnderDocker) {
  // dockerd's default cgroup parent for the cgroupfs driver is "/docker"
  // (daemon/oci_linux.go, getCgroupsPath): every v1 hierarchy gets /docker/<id>.
  CgroupInfo c = ParseProcCgroup("12:pids:/docker/" + kId + "\n4:memory:/docker/" + kId +
                                 "\n1:name=systemd:/docker/" + kId + "\n0::/\n");
  EXPECT_EQ(c.path, "/docker/" + kId);
  EXPECT_EQ(c.unit, "");
  EXPECT_EQ(c.container_runtime, "docker");
  EXPECT_EQ(c.container_id, kId);
}

TEST(CgroupTest, KubeletsSystemdDriverNamesThePodAndItsQosInSlices) {
  // kubelet's systemd driver (pkg/kubelet/cm/cgroup_manager_linux.go,
  // ToSystemd) turns /kubepods/burstable/pod<uid> into nested slices, the
  // UID's '-' written '_'; containerd's CRI plugin with SystemdCgroup names
  // the container "cri-containerd:<id>", a scope cri-containerd-<id>.scope.
  CgroupInfo b =
      ParseProcCgroup("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" +
                      kPodUnderscored + ".slice/cri-containerd-" + kId + ".scope\n");
  EXPECT_EQ(b.container_runtime, "containerd");
  EXPECT_EQ(b.container_id, kId);
  EXPECT_EQ(b.pod_uid, kPod);
  EXPECT_EQ(b.qos, "burstable");
  EXPECT_EQ(b.unit, "cri-containerd-" + kId + ".scope");
  // Guaranteed pods get no QoS slice (pkg/kubelet/cm/qos_container_manager_linux.go);
  // cri-o's systemd manager names its scopes crio-<id>.scope.
  CgroupInfo g = ParseProcCgroup("0::/kubepods.slice/kubepods-pod" + kPodUnderscored +
                                 ".slice/crio-" + kId + ".scope\n");
  EXPECT_EQ(g.container_runtime, "cri-o");
  EXPECT_EQ(g.pod_uid, kPod);
  EXPECT_EQ(g.qos, "guaranteed");
  // A kubelet with its own cgroup root (kind's nodes: --cgroup-root=/kubelet)
  // prefixes every slice with it.
  CgroupInfo k = ParseProcCgroup(
      "0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
      "kubelet-kubepods-besteffort-pod" +
      kPodUnderscored + ".slice/cri-containerd-" + kId + ".scope\n");
  EXPECT_EQ(k.pod_uid, kPod);
  EXPECT_EQ(k.qos, "besteffort");
  EXPECT_EQ(k.container_id, kId);
  // A static pod's UID is kubelet's 32-hex hash of its manifest
  // (pkg/kubelet/config/common.go, generatePodName's uid).
  CgroupInfo s = ParseProcCgroup(
      "0::/kubepods.slice/kubepods-besteffort.slice/"
      "kubepods-besteffort-pod0123456789abcdef0123456789abcdef.slice/crio-" +
      kId + ".scope\n");
  EXPECT_EQ(s.pod_uid, "0123456789abcdef0123456789abcdef");
  // The pause container and the pod's own slice: a pod, no container.
  CgroupInfo p = ParseProcCgroup("0::/kubepods.slice/kubepods-pod" + kPodUnderscored + ".slice\n");
  EXPECT_EQ(p.pod_uid, kPod);
  EXPECT_EQ(p.container_id, "");
}

TEST(CgroupTest, KubeletsCgroupfsDriverNamesThePodAndOnlyTheContainersId) {
  // kubelet's cgroupfs driver: /kubepods/<qos>/pod<uid>/<id>, guaranteed
  // pods directly under /kubepods; the engine is not in the path.
  CgroupInfo b =
      ParseProcCgroup("11:memory:/kubepods/besteffort/pod" + kPod + "/" + kId +
                      "\n1:name=systemd:/kubepods/besteffort/pod" + kPod + "/" + kId + "\n");
  EXPECT_EQ(b.pod_uid, kPod);
  EXPECT_EQ(b.qos, "besteffort");
  EXPECT_EQ(b.container_id, kId);
  EXPECT_EQ(b.container_runtime, "");
  CgroupInfo g = ParseProcCgroup("0::/kubepods/pod" + kPod + "/crio-" + kId + "\n");
  EXPECT_EQ(g.qos, "guaranteed");
  EXPECT_EQ(g.container_runtime, "cri-o");
}

TEST(CgroupTest, PodmanNamesItsScopesLibpod) {
  // podman (containers/common, systemd cgroup manager): root containers in
  // machine.slice, rootless ones in the user's manager, libpod-<id>.scope;
  // conmon, its monitor, in libpod-conmon-<id>.scope: no container.
  CgroupInfo r = ParseProcCgroup("0::/machine.slice/libpod-" + kId + ".scope\n");
  EXPECT_EQ(r.container_runtime, "podman");
  EXPECT_EQ(r.container_id, kId);
  EXPECT_EQ(r.unit, "libpod-" + kId + ".scope");
  CgroupInfo u =
      ParseProcCgroup("0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" + kId +
                      ".scope/container\n");
  EXPECT_EQ(u.container_id, kId);
  EXPECT_EQ(u.unit, "user@1000.service");
  CgroupInfo m = ParseProcCgroup("0::/machine.slice/libpod-conmon-" + kId + ".scope\n");
  EXPECT_EQ(m.container_id, "");
  // The cgroupfs manager: /libpod_parent/libpod-<id>.
  EXPECT_EQ(ParseProcCgroup("4:memory:/libpod_parent/libpod-" + kId + "\n").container_runtime,
            "podman");
}

TEST(CgroupTest, ACgroupThatOnlyLooksLikeAContainerIsNone) {
  // Anyone allowed to create cgroups names them: only the exact shapes count.
  for (const std::string& path : {
           "/docker/" + kId.substr(1),                 // 63 digits
           "/system.slice/docker-" + kId + "0.scope",  // 65
           "/system.slice/docker-" + std::string(64, 'G') + ".scope",
           std::string("/docker/3F1A0C9D7B2E4F6A8C0E1D2B3A4F5E6D7C8B9A0F1E2D3C4B5A69788766554433"),
           "/system.slice/docker-" + kId.substr(0, 60) + "\x1b[2J.scope",
           "/kubepods/burstable/pod\x1b[2J" + kPod.substr(4),
           std::string("/kubepods.slice/kubepods-podzz.slice"),
           "/notkube/pod" + kPod,
       }) {
    CgroupInfo c = ParseProcCgroup("0::" + path + "\n");
    EXPECT_EQ(c.container_id, "") << path;
    EXPECT_EQ(c.pod_uid, "") << path;
    EXPECT_EQ(c.qos, "") << path;
  }
}

TEST(CgroupTest, HostileTextIsBounded) {
  // A path longer than PATH_MAX is no path the kernel writes: ignored.
  std::string huge = "0::/" + std::string(1 << 20, 'a') + "/docker-" + kId + ".scope\n";
  EXPECT_EQ(ParseProcCgroup(huge).path, "");
  EXPECT_EQ(ParseProcCgroup(huge).container_id, "");
  // Lines past the bound are not read.
  std::string many;
  for (size_t i = 0; i < kMaxLines; ++i) many += "5:cpu:/x\n";
  EXPECT_EQ(ParseProcCgroup(many + "0::/system.slice/a.service\n").path, "");
  EXPECT_EQ(ParseProcCgroup("0::/system.slice/a.service\n" + many).path, "/system.slice/a.service");
  // Lines that are no /proc/PID/cgroup line.
  EXPECT_EQ(ParseProcCgroup("0:memory:/a.service\n").path, "");
  EXPECT_EQ(ParseProcCgroup("5::/a.service\n").path, "");
  EXPECT_EQ(ParseProcCgroup("0::relative.service\n").path, "");
  EXPECT_EQ(ParseProcCgroup(":::::\n\n\n:").path, "");
  EXPECT_EQ(ParseProcCgroup(std::string("0::/a\0b.service\n", 17)).unit, "");
  // A million empty lines cost the bound's worth of work, not a vector of them.
  EXPECT_EQ(ParseProcCgroup(std::string(1 << 20, '\n')).path, "");
}

}  // namespace
}  // namespace flightrec::cgroup
