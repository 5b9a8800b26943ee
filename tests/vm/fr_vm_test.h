/*
 * What fr_vm_test.c shares with the scenario files compiled into the same
 * guest test driver (fr_vm_nmi.c).
 */
#ifndef FR_VM_TEST_H
#define FR_VM_TEST_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

#include "module/uapi/flightrec.h"

#define FAIL(...) do { printf(__VA_ARGS__); printf("\n"); exit(1); } while (0)

/* Functions whose address ranges samples are checked against: no inlining, no clones. */
#ifdef __clang__
#define SAMPLED __attribute__((noinline))
#else
#define SAMPLED __attribute__((noinline, noclone))
#endif

extern int fd;				/* /dev/flightrec */
extern struct flightrec_info info;	/* its INFO */

uint64_t now_ns(void);
struct flightrec_cpu_stats *get_stats(struct flightrec_stats *s);
void spin_a(uint64_t ms);
void die_with_parent(void);
pid_t spawn_crash(uint64_t ms, int gate_r, int gate_w);
void wait_segv(pid_t p, const char *what);
/* One DATA record decoded: the header's fields and its frames split. */
struct xsample {
	uint64_t time_ns, ip, aux_pos, seq;
	uint32_t size, aux_len, cpu, pid, tid;
	uint16_t type, flags, mode, nr_kframes, nr_uframes, abi;
	uint64_t kframes[FLIGHTREC_MAX_KFRAMES];
	uint64_t uframes[FLIGHTREC_MAX_UFRAMES];
};

size_t decode_records(const char *buf, uint64_t bytes, uint64_t first, struct xsample **out);
size_t read_data(uint32_t cpu, struct xsample **out, struct flightrec_read *rr);
int check_invariants(const char *what);
void func_range(const char *name, void *fn, uint64_t *lo, uint64_t *hi);
uint32_t list_markers(struct flightrec_marker *m);
/* LIST_MARKERS once @want markers are READY (the copy is deferred; up to 60 s). */
uint32_t list_markers_wait(struct flightrec_marker *m, uint32_t want);

/* Symbol @name in the ELF file @path: its vaddr, size and file offset; 0 if found. */
int elf_sym(const char *path, const char *name, uint64_t *vaddr, uint64_t *size, uint64_t *fileoff);

/* fr_vm_panic.c: panic-info|panic-dump|panic-check|panic-release|panic-corrupt|panic-burn */
int cmd_panic(int argc, char **argv);

/* The marker of @pid (waiting up to 60 s for it): 0, or -1 if there is none. */
int find_marker(pid_t pid, struct flightrec_marker *out);
/* One CPU's preserved DATA or AUX history of a marker, whole, malloc'd. */
void *read_marker(uint32_t slot, uint32_t cpu, uint32_t ring, struct flightrec_marker_read *out);

/* fr_vm_marker.c */
int cmd_markpad(int tries);

/* fr_vm_hookcap.c */
int cmd_hookcap(int crashes);

/* fr_vm_iouring.c */
int cmd_iouring(int seconds);

/* fr_vm_nmi.c */
int cmd_nmi(int seconds, const char *torture_params);

#endif /* FR_VM_TEST_H */
