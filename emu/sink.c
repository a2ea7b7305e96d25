// SPDX-License-Identifier: MIT
/*
 * Placing an incoming payload. Every chunk is checked again against the memory-key table
 * and placed while the check's reference is held, for one memcpy or one non-blocking recv:
 * a region deregistered mid-message is never written after mr_deregister() returns, and
 * the rest of the message is discarded.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "emu/internal.h"

static uint8_t discard_buf[65536];

/*
 * The most one chunk's check covers: an ODP region's check faults the chunk's pages in, so
 * a large message is faulted in as it arrives, never its whole remaining length per chunk.
 */
#define SINK_CHUNK_MAX	(1u << 20)

uint64_t sge_total_length(const struct ibv_sge *sge, int num_sge)
{
	uint64_t total = 0;

	for (int i = 0; i < num_sge; i++)
		total += sge[i].length;
	return total;
}

/* The next place to write at s->offset: a pointer, its room, and the reference to drop. */
static bool sink_window(struct rx_sink *s, size_t want, uint8_t **ptr, size_t *room,
			struct mem_region **ref)
{
	enum mem_access_result r;
	void *host;

	if (s->kind == SINK_DISCARD || s->failure != MEM_ACCESS_OK)
		return false;
	if (want > SINK_CHUNK_MAX)
		want = SINK_CHUNK_MAX;
	if (s->kind == SINK_REMOTE) {
		r = mr_check_remote_access(s->mem, s->rkey, s->pd_handle, s->qpn,
					   s->qp_access,
					   s->needed, s->va + s->offset, want, ref, &host);
		*room = want;
	} else {
		uint64_t skip = s->offset;
		int i = 0;

		while (i < s->num_sge && skip >= s->sge[i].length)
			skip -= s->sge[i++].length;
		if (i == s->num_sge) {
			s->failure = MEM_ACCESS_OUT_OF_BOUNDS;
			return false;
		}
		*room = s->sge[i].length - skip < want ? s->sge[i].length - skip : want;
		r = mr_check_local_access(s->mem, s->sge[i].lkey, s->pd_handle, s->needed,
					  s->sge[i].addr + skip, *room, ref, &host);
	}
	if (r != MEM_ACCESS_OK) {
		s->failure = r;
		return false;
	}
	*ptr = host;
	return true;
}

void sink_place(struct rx_sink *s, const uint8_t *src, size_t n)
{
	while (n) {
		struct mem_region *ref = NULL;
		uint8_t *dst;
		size_t room;

		if (!sink_window(s, n, &dst, &room, &ref))
			return;
		if (room)
			memcpy(dst, src, room);
		if (ref)
			mr_put(ref);
		s->offset += room;
		src += room;
		n -= room;
	}
}

static ssize_t sink_discard(int fd, size_t n)
{
	return recv(fd, discard_buf, n < sizeof(discard_buf) ? n : sizeof(discard_buf),
		    MSG_DONTWAIT);
}

ssize_t sink_recv(struct rx_sink *s, int fd, size_t n)
{
	struct mem_region *ref = NULL;
	uint8_t *dst;
	size_t room;
	ssize_t got;

	if (!sink_window(s, n, &dst, &room, &ref))
		return sink_discard(fd, n);
	got = recv(fd, dst, room, MSG_DONTWAIT);
	if (ref)
		mr_put(ref);
	if (got < 0 && errno == EFAULT) {
		/*
		 * A page of the target is not there (an unpinned region the application
		 * unmapped): TCP kept the bytes, the access fails and they are discarded.
		 */
		s->failure = MEM_ACCESS_PAGE_FAULT;
		return sink_discard(fd, n);
	}
	if (got > 0)
		s->offset += (uint64_t)got;
	return got;
}

void sink_pull(struct rx_sink *s, pid_t pid, const struct iovec *remote, int nremote)
{
	for (int i = 0; i < nremote; i++) {
		uint8_t *from = remote[i].iov_base;
		size_t left = remote[i].iov_len;

		while (left) {
			struct mem_region *ref = NULL;
			struct iovec dst, src;
			size_t room;
			ssize_t got;

			if (!sink_window(s, left, (uint8_t **)&dst.iov_base, &room, &ref))
				return;	/* refused or discarded: nothing more to read */
			dst.iov_len = room;
			src.iov_base = from;
			src.iov_len = room;
			got = room ? process_vm_readv(pid, &dst, 1, &src, 1, 0) : 0;
			if (ref)
				mr_put(ref);
			if (got != (ssize_t)room) {
				s->failure = MEM_ACCESS_PEER_FAULT;
				return;
			}
			s->offset += room;
			from += room;
			left -= room;
		}
	}
}
