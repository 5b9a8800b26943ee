// SPDX-License-Identifier: GPL-2.0
/*
 * fr_panic_load.c - the panic region at load and afterwards: find out what
 * the region an earlier boot left holds (fr_panic_found(), called by
 * fr_panic_init() in fr_panic.c) and the PANIC_INFO/READ/RELEASE ioctls.
 * Layout and states: uapi/flightrec.h ("Panic region").
 */
#define pr_fmt(fmt) "flightrec: " fmt

#include <linux/fs.h>
#include <linux/uuid.h>

#include "fr_internal.h"

/* ---- load: find out what the region holds ---- */

/* This boot's id, /proc/sys/kernel/random/boot_id (a UUID string), as 16 bytes. */
void fr_read_boot_id(u8 *id)
{
	char buf[UUID_STRING_LEN + 1] = "";
	struct file *f = filp_open("/proc/sys/kernel/random/boot_id", O_RDONLY, 0);
	loff_t pos = 0;
	uuid_t u;

	memset(id, 0, 16);
	if (IS_ERR(f)) {
		pr_warn("panic region: boot_id: %ld\n", PTR_ERR(f));
		return;
	}
	if (kernel_read(f, buf, UUID_STRING_LEN, &pos) == UUID_STRING_LEN && !uuid_parse(buf, &u))
		memcpy(id, u.b, 16);
	else
		pr_warn("panic region: cannot parse boot_id\n");
	filp_close(f, NULL);
}

/* The header of what the region holds: 0 if it can be trusted, else why not. */
static int fr_panic_check(const struct flightrec_panic_header *h, const char **why)
{
	struct flightrec_panic_header c;
	u64 descs;

	if (h->version != FLIGHTREC_PANIC_VERSION) {
		*why = "unknown version";
		return -EPROTO;
	}
	if (h->header_size != sizeof(*h)) {
		*why = "header size";
		return -EINVAL;
	}
	memcpy(&c, h, sizeof(c));
	c.header_crc = 0;
	if (fr_crc(&c, sizeof(c)) != h->header_crc) {
		*why = "header checksum mismatch";
		return -EBADMSG;
	}
	descs = (u64)h->nr_cpus * sizeof(struct flightrec_panic_cpu);
	if (h->region_size != fr.panic.size ||
	    h->cpu_desc_size != sizeof(struct flightrec_panic_cpu) ||
	    h->mod_desc_size != sizeof(struct flightrec_panic_module) || !h->nr_cpus ||
	    h->nr_cpus > 8192 || h->cpu_off < FLIGHTREC_PANIC_HEADER_BYTES ||
	    h->cpu_off + descs > h->region_size ||
	    h->mod_off + (u64)h->mod_count * h->mod_desc_size > h->region_size ||
	    h->sb_off + (u64)h->sb_count * FR_SB_REC > h->region_size ||
	    h->data_off + h->data_size > h->region_size || h->data_off > h->region_size) {
		*why = "inconsistent sizes or offsets";
		return -EINVAL;
	}
	if (h->rec_off && (h->rec_off < sizeof(*h) || h->rec_size > FR_REC_MAX ||
			   h->rec_off + h->rec_size > FLIGHTREC_PANIC_HEADER_BYTES)) {
		*why = "panic record outside the header area";
		return -EINVAL;
	}
	if (h->state != FLIGHTREC_PANIC_ARMED && h->state != FLIGHTREC_PANIC_CAPTURED) {
		*why = "unknown state";
		return -EINVAL;
	}
	return 0;
}

/*
 * fr_panic_found() - at load, what the mapped region holds: nothing, an
 * armed header of an earlier boot (no panic), a header that fails its checks
 * (refused), all three armed for this boot, or a capture (held).
 */
void fr_panic_found(void)
{
	struct flightrec_panic_header *h = fr.panic.map;
	const char *why = "";
	int err;

	if (h->magic != FLIGHTREC_PANIC_MAGIC) {
		pr_info("panic region %#llx+%#llx: empty (cold boot or never armed), armed for this boot\n",
			fr.panic.phys, fr.panic.size);
		fr.panic.found = FLIGHTREC_PANIC_EMPTY;
		fr_panic_arm();
		return;
	}
	err = fr_panic_check(h, &why);
	if (err) {
		pr_warn("panic region %#llx+%#llx refused: %s (%d); re-armed for this boot\n",
			fr.panic.phys, fr.panic.size, why, err);
		fr.panic.found = FLIGHTREC_PANIC_REFUSED;
		fr.panic.error = err;
		fr_panic_arm();
		return;
	}
	if (h->state == FLIGHTREC_PANIC_ARMED) {
		pr_info("panic region %#llx+%#llx: armed by boot %pUb (%.65s), no panic; armed for this boot\n",
			fr.panic.phys, fr.panic.size, h->boot_id, h->release);
		fr.panic.found = FLIGHTREC_PANIC_EMPTY;
		fr_panic_arm();
		return;
	}
	pr_info("panic region %#llx+%#llx: held: a panic of boot %pUb (%.65s) on cpu %u, %u later panic(s) lost; read-only until released\n",
		fr.panic.phys, fr.panic.size, h->boot_id, h->release, h->panic_cpu, h->panics_lost);
	fr.panic.found = FLIGHTREC_PANIC_HELD;
	atomic_set(&fr.panic.mode, FR_PANIC_HELD);
}

/* ---- ioctls (fr_dev.c, under fr.lock) ---- */

void fr_panic_info(struct flightrec_panic_info *pi)
{
	memset(pi, 0, sizeof(*pi));
	pi->state = fr.panic.found;
	pi->error = fr.panic.error;
	pi->region_phys = fr.panic.phys;
	pi->region_size = fr.panic.size;
	if (fr.panic.found == FLIGHTREC_PANIC_HELD)
		pi->held_bytes = fr.panic.size;
}

int fr_panic_read(struct flightrec_panic_read *r)
{
	u64 len;

	if (r->reserved[0] || r->reserved[1])
		return -EINVAL;
	if (fr.panic.found != FLIGHTREC_PANIC_HELD)
		return -ENOENT;
	if (r->offset > fr.panic.size)
		return -EINVAL;
	len = min(r->buf_len, fr.panic.size - r->offset);
	if (len && copy_to_user(u64_to_user_ptr(r->buf), fr.panic.map + r->offset, len))
		return -EFAULT;
	r->bytes = len;
	return 0;
}

int fr_panic_release(void)
{
	if (fr.panic.found != FLIGHTREC_PANIC_HELD)
		return -ENOENT;
	fr_panic_arm();
	fr.panic.found = FLIGHTREC_PANIC_EMPTY;
	fr.panic.error = 0;
	pr_info("panic region released: armed for this boot\n");
	return 0;
}
