// Registers the one Ceph cluster all fleet scenarios share (started once per
// run: its ~30 s startup is paid once, not per test).
#include "tests/fleet/ceph_fixture.h"

namespace {
[[maybe_unused]] auto* const kCeph =
    ::testing::AddGlobalTestEnvironment(new flightrec::testing::CephEnvironment);
}  // namespace
