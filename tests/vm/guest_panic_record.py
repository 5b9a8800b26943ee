# Scenario panic, boot 2 (tests/vm/guest_panic.sh): checks the record of kind
# panic that recorderd stored from the held region against what the module
# itself says the region holds (fr_vm_test panic-check's JSON of the same
# region).  One python3 -S start (seconds under TCG) for every check.
#
# usage: guest_panic_record.py LIST.json INFO.json CHECK.json LIB THIS_BOOT_ID
#          PANIC_CPU WORK_CPU LOADED_NS
# Prints "panic record ok: ..." (and a FLIGHTREC-VM-PANIC-RECORD line for the
# host, which compares the boot id with boot 1's) or "panic record FAIL: ...";
# exits non-zero on a failure.
import json
import sys

lst, info, check = (json.load(open(p)) for p in sys.argv[1:4])
lib, this_boot = sys.argv[4], sys.argv[5]
panic_cpu, work_cpu, loaded_ns = int(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8])
bad = []

# crash list: exactly one row of kind panic, naming the crashed boot.
panics = [r for r in lst if r.get("kind") == "panic"]
if len(panics) != 1:
    bad.append("crash list has %d panic rows, not 1" % len(panics))
row = panics[0] if panics else {}
boot = row.get("panic", {}).get("boot_id", "")
if boot != check["boot_id"] or boot == this_boot:
    bad.append("record boot id %r: region %r, this boot %r" % (boot, check["boot_id"], this_boot))

p = info.get("panic", {})
period = p.get("sampling", {}).get("period", 0) or 10_000_000
if p.get("panic_cpu") != panic_cpu:
    bad.append("panic cpu %r" % p.get("panic_cpu"))
if p.get("kernel_frames") != "resolved":
    bad.append("kernel frames %r: %s" % (p.get("kernel_frames"), p.get("kernel_frames_note")))
# Two panics in a row without a claim (CHECK.json is of the region before the
# second, whose history it left as it was): the first kept, the record says
# one was lost.
if p.get("panics_lost") != check["panics_lost"] + 1:
    bad.append("panics_lost %r (region before the 2nd panic: %r)" % (p.get("panics_lost"),
                                                                   check["panics_lost"]))

# The panicking CPU: its timer's last sample within 2 periods of the panic,
# the panic record's kernel stack on the sysrq crash path.
pc = info.get("panicking_cpu", {})
gap = pc.get("last_timer_sample_before_panic_ns")
if pc.get("cpu") != panic_cpu or not pc.get("last_timer_sample_mono_ns") or abs(gap) > 2 * period:
    bad.append("panicking cpu's last timer sample %r ns before the panic (period %d)" % (gap, period))
stacks = pc.get("last_samples", [])
rec = stacks[-1] if stacks else {}
sysrq = [f for f in rec.get("frames", []) if f.startswith(("sysrq_handle_crash", "__handle_sysrq"))]
if not rec.get("panic_record") or not sysrq:
    bad.append("panic record stack without the sysrq path: %r" % rec.get("frames", [])[:8])

# The workload's CPU: fr_vm_burn from its file dominates the last second.
top = []
for c in info.get("cpus", []):
    if c.get("cpu") == work_cpu:
        top = c.get("last_second", {}).get("top", [])
want = "fr_vm_burn (%s)" % lib
if not top or top[0].get("function") != want or top[0].get("pct", 0) <= 50:
    bad.append("cpu %d's last second: %r, expected %r on top" % (work_cpu, top[:3], want))

# Counters: what the record says each CPU held, overwrote and left out equals
# what the module wrote in the region.
held = recs = 0
mod = {c["cpu"]: c for c in check["cpus"]}
for c in p.get("cpus", []):
    m = mod.get(c.get("cpu"))
    if m is None:
        bad.append("cpu %r not in the region" % c.get("cpu"))
        continue
    for k_rec, k_mod in (("records", "records"), ("held", "records"), ("overwritten", "overwritten"),
                         ("not_copied", "not_copied"), ("written", "written"),
                         ("produced", "produced")):
        if c.get(k_rec) != m[k_mod]:
            bad.append("cpu %d %s %r, module %r" % (c["cpu"], k_rec, c.get(k_rec), m[k_mod]))
    held += c.get("held", 0)
    recs += m["records"]
if len(p.get("cpus", [])) != len(mod):
    bad.append("%d cpus in the record, %d in the region" % (len(p.get("cpus", [])), len(mod)))
if p.get("samples_held") != held or info.get("samples") != held + 1:
    bad.append("samples_held %r, samples %r, held %d" % (p.get("samples_held"), info.get("samples"), held))

ms = (row.get("created_ns", 0) - loaded_ns) / 1e6
pct = 100.0 * held / recs if recs else 0
if bad:
    print("panic record FAIL: " + "; ".join(bad))
    sys.exit(1)
print("FLIGHTREC-VM-PANIC-RECORD " + json.dumps({"id": row.get("id"), "boot_id": boot}))
print("FLIGHTREC-VM-BENCH panic_recovery load_to_commit_ms=%.0f recovered_pct=%.1f samples=%d of %d "
      "cpus=%d gap_ns=%d top=%.0f%%" % (ms, pct, held, recs, len(mod), gap, top[0]["pct"]))
print("panic record ok: boot %s, %d of %d samples (%.1f%%), committed %.0f ms after the module load; "
      "last timer sample %.1f ms before the panic; fr_vm_burn %.0f%% of cpu %d's last second; panics_lost 1"
      % (boot, held, recs, pct, ms, gap / 1e6, top[0]["pct"], work_cpu))
