/*
 * fr_vm_test iouring SECONDS: io_uring's workers share the process's mm but
 * have no user state of their own (6.1: PF_IO_WORKER; from 6.4:
 * PF_USER_WORKER), so perf gives their samples no user registers
 * (perf_sample_regs_user(), kernel/events/core.c), and neither may
 * flightrec.  Reads of /dev/zero forced onto io-wq (IOSQE_ASYNC) keep the
 * workers busy in kernel mode (clear_user()) for SECONDS; then every sample
 * of a thread of this process other than the main thread, which only
 * io_uring creates here, must have ABI NONE and no user frames.  On x86 a
 * worker's saved user registers are its creator's with ip and sp zeroed
 * (copy_thread()), which an unexcluded worker's samples carry.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tests/vm/fr_vm_test.h"

#define IOU_QD		8
#define IOU_LEN		(1U << 20)

struct iou {
	int fd;
	unsigned int *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail;
	struct io_uring_sqe *sqes;
};

static void iou_setup(struct iou *u)
{
	struct io_uring_params p;
	char *sq, *cq;

	memset(&p, 0, sizeof(p));
	u->fd = syscall(__NR_io_uring_setup, IOU_QD, &p);
	if (u->fd < 0)
		FAIL("iouring: io_uring_setup: %s", strerror(errno));
	sq = mmap(NULL, p.sq_off.array + p.sq_entries * sizeof(unsigned int),
		  PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, u->fd, IORING_OFF_SQ_RING);
	cq = mmap(NULL, p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe),
		  PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, u->fd, IORING_OFF_CQ_RING);
	u->sqes = mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_POPULATE, u->fd, IORING_OFF_SQES);
	if (sq == MAP_FAILED || cq == MAP_FAILED || u->sqes == MAP_FAILED)
		FAIL("iouring: mmap rings: %s", strerror(errno));
	u->sq_tail = (unsigned int *)(sq + p.sq_off.tail);
	u->sq_mask = (unsigned int *)(sq + p.sq_off.ring_mask);
	u->sq_array = (unsigned int *)(sq + p.sq_off.array);
	u->cq_head = (unsigned int *)(cq + p.cq_off.head);
	u->cq_tail = (unsigned int *)(cq + p.cq_off.tail);
}

/* One batch: IOU_QD reads of /dev/zero on io-wq, waited for. */
static void iou_batch(struct iou *u, int zero, char *buf)
{
	unsigned int tail = *u->sq_tail;

	for (unsigned int i = 0; i < IOU_QD; i++, tail++) {
		unsigned int k = tail & *u->sq_mask;
		struct io_uring_sqe *e = &u->sqes[k];

		memset(e, 0, sizeof(*e));
		e->opcode = IORING_OP_READ;
		e->flags = IOSQE_ASYNC;
		e->fd = zero;
		e->addr = (uintptr_t)(buf + (size_t)i * IOU_LEN);
		e->len = IOU_LEN;
		u->sq_array[k] = k;
	}
	__atomic_store_n(u->sq_tail, tail, __ATOMIC_RELEASE);
	if (syscall(__NR_io_uring_enter, u->fd, IOU_QD, IOU_QD, IORING_ENTER_GETEVENTS, NULL, 0) < 0)
		FAIL("iouring: io_uring_enter: %s", strerror(errno));
	__atomic_store_n(u->cq_head, __atomic_load_n(u->cq_tail, __ATOMIC_ACQUIRE),
			 __ATOMIC_RELEASE);
}

int cmd_iouring(int seconds)
{
	uint64_t deadline = now_ns() + (uint64_t)seconds * 1000000000ULL;
	size_t workers = 0, bad = 0, batches = 0;
	char *buf = malloc((size_t)IOU_QD * IOU_LEN);
	int zero = open("/dev/zero", O_RDONLY);
	pid_t me = getpid();
	struct iou u;

	if (!buf || zero < 0)
		FAIL("iouring: buffers or /dev/zero: %s", strerror(errno));
	iou_setup(&u);
	while (now_ns() < deadline) {
		iou_batch(&u, zero, buf);
		batches++;
	}
	for (uint32_t c = 0; c < info.nr_cpus; c++) {
		struct xsample *s;
		size_t n = read_data(c, &s, NULL);

		for (size_t i = 0; i < n; i++) {
			if ((pid_t)s[i].pid != me || (pid_t)s[i].tid == me)
				continue;
			workers++;
			if (s[i].abi != 0 || s[i].nr_uframes || (s[i].flags & FLIGHTREC_SAMPLE_HAS_AUX)) {
				if (!bad)
					printf("worker tid %u: mode %u abi %u, %u user frames (first %#llx), flags %#x\n",
					       s[i].tid, s[i].mode, s[i].abi, s[i].nr_uframes,
					       (unsigned long long)(s[i].nr_uframes ? s[i].uframes[0] : 0),
					       s[i].flags);
				bad++;
			}
		}
		free(s);
	}
	if (workers < 5 || bad)
		FAIL("iouring: %zu samples of io_uring workers (want >= 5), %zu with user state (want 0); %zu batches",
		     workers, bad, batches);
	printf("iouring: %zu samples of io_uring workers, none with user registers or frames; %zu batches of %u reads\n",
	       workers, batches, IOU_QD);
	return 0;
}
