#!/usr/bin/env bash
# For a machine WITH Intel PT (the project's own machines have none): checks
# what the tests cannot, that a real intel_pt writes the trace recorderd keeps
# and that `recorder trace` decodes the last branches before a crash.
#
# Starts a private recorderd (--aux-trace pt, its own store and socket),
# runs tests/programs/fr_pt_calls on CPU 0 (it spins FR_PT_SPIN_MS ms so it
# is sampled there, then main -> a -> b -> c, three returns, and crash()
# faults at fr_pt_fault), dumps from CPU 1 at once, and checks that CPU 0's
# decoded flow ends with exactly those calls and returns and stops at
# fr_pt_fault. Root; needs a build (scripts/setup.sh). Exit 0 pass, 1 fail,
# 2 cannot run here (no intel_pt, not root, no build).
#
# Usage: scripts/check_pt.sh [--keep]   (--keep leaves the store for a look)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${FLIGHTREC_BUILD_DIR:-build}
keep=0
[ "${1:-}" = "--keep" ] && keep=1

skip() { echo "check_pt: cannot run here: $*" >&2; exit 2; }
[ -r /sys/bus/event_source/devices/intel_pt/type ] ||
  skip "no intel_pt PMU (/sys/bus/event_source/devices/intel_pt); a VM needs PT passed through"
[ "$(id -u)" = 0 ] || skip "run as root (a system-wide trace PMU)"
for f in recorder/daemon/recorderd recorder/cli/recorder tests/programs/fr_pt_calls; do
  [ -x "$BUILD/$f" ] || skip "$BUILD/$f is not built (scripts/setup.sh)"
done
[ "$(nproc)" -ge 2 ] || skip "needs two CPUs (the program on one, the dump on the other)"

tmp=$(mktemp -d)
daemon=
cleanup() {
  if [ -n "$daemon" ]; then kill "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; fi
  if [ "$keep" = 1 ]; then echo "check_pt: kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
rec() { "$BUILD/recorder/cli/recorder" --store "$tmp/store" --socket "$tmp/sock" "$@"; }

"$BUILD/recorder/daemon/recorderd" --foreground --backend perf -F 999 \
  --store "$tmp/store" --socket "$tmp/sock" --aux-trace pt,size=4M >"$tmp/recorderd.log" 2>&1 &
daemon=$!
for _ in $(seq 100); do rec status >/dev/null 2>&1 && break; sleep 0.1; done
rec status --json >"$tmp/status.json" || { cat "$tmp/recorderd.log"; exit 1; }
python3 - "$tmp/status.json" <<'PY' || { cat "$tmp/recorderd.log"; exit 1; }
import json, sys
t = json.load(open(sys.argv[1]))["aux_trace"]
print("check_pt: status:", json.dumps(t))
sys.exit(0 if t.get("enabled") else 1)
PY

FR_PT_SPIN_MS=300 taskset -c 0 "$BUILD/tests/programs/fr_pt_calls" || true  # SIGSEGV by design
id=$(taskset -c 1 "$BUILD/recorder/cli/recorder" --store "$tmp/store" --socket "$tmp/sock" \
       dump --last 2s --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
rec trace "$id" --cpu 0 --json >"$tmp/trace.json"
rec trace "$id" --cpu 0 --instructions 32 >"$tmp/trace.txt" || true

python3 - "$tmp/trace.json" "$BUILD/tests/programs/fr_pt_calls" <<'PY'
import json, subprocess, sys
cpu = json.load(open(sys.argv[1]))["cpus"][0]
flow = [(s["kind"], s["function"], s.get("target_function", "")) for s in cpu["flow"]]
want = [("call", "main", "a"), ("call", "a", "b"), ("call", "b", "c"), ("return", "c", "b"),
        ("return", "b", "a"), ("return", "a", "main"), ("call", "main", "crash")]
print(f"check_pt: cpu 0 decoded as pid {cpu['pid']} ({cpu['comm']}): {cpu['trace_bytes']} bytes, "
      f"{cpu['instructions']} instructions, {cpu['gaps']} gaps, flags {cpu['flags']!r}")
for n in cpu["image_notes"]:
    print("check_pt: note:", n)
if cpu["comm"] != "fr_pt_calls":
    sys.exit("check_pt: FAIL: CPU 0's trace was not cut while fr_pt_calls was its last task "
             "(another task was sampled there before the dump: run again)")
calls = [f for f in flow if f[0] in ("call", "return")]
at = next((i for i in range(len(calls)) if calls[i:i + len(want)] == want), None)
if at is None:
    sys.exit(f"check_pt: FAIL: the calls and returns main->a->b->c->crash are not in the flow:"
             f" {calls[-12:]}")
# The fault: where the user-only trace stopped (FUP + TIP.PGD at the store).
fault = int(subprocess.check_output(["nm", sys.argv[2]], text=True).split("fr_pt_fault")[0]
            .splitlines()[-1].split()[0], 16)
stops = [s for s in cpu["flow"] if s["kind"] == "disabled" and s["function"] == "crash"]
if not stops:
    sys.exit("check_pt: FAIL: the trace does not stop in crash()")
off = stops[-1]["ip"] & 0xfff
print(f"check_pt: trace stops in crash at page offset {off:#x}; fr_pt_fault is at {fault & 0xfff:#x}")
if off != fault & 0xfff:
    sys.exit("check_pt: FAIL: the trace does not stop at the faulting instruction")
print("check_pt: PASS: decoded main->a->b->c, three returns, call crash, stop at fr_pt_fault")
PY
echo "check_pt: the decoded text is in $tmp/trace.txt:"; tail -20 "$tmp/trace.txt"
