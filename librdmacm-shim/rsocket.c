// SPDX-License-Identifier: MIT
/*
 * The rsocket API of librdmacm over kernel TCP. softrdma has no RDMA hardware, so an rsocket
 * is a kernel socket: the descriptor rsocket() returns is the socket itself, and binding,
 * listening, connecting and the ordinary socket options are the kernel's. What rsockets add
 * travels in frames (rsocket.h): stream data, and riowrite() data that lands in a buffer the
 * peer registered with riomap() without any call on the peer's side, as RDMA writes do.
 *
 * Receiving: until a socket has a remotely writable mapping, the calling thread parses the
 * frames and reads stream data straight into the caller's buffer ("inline" receive). The
 * first riomap(PROT_WRITE) switches the socket to "async" receive for good: a progress thread
 * reads every frame as it arrives, copies IOWRITE payloads into the mapped buffers and queues
 * stream data in a ring that rrecv() drains. riostream waits for riowrite() data by spinning
 * on a byte of its buffer, so nothing short of a thread can make that data arrive.
 *
 * Sending: frames never interleave, yet a nonblocking send may be taken only in part by the
 * kernel. The rest of that frame goes to a backlog that must reach the wire before anything
 * else; the caller is told the whole frame was sent, and the progress thread (started the
 * first time this happens) flushes the backlog even if the application never calls again.
 *
 * Datagram rsockets are plain UDP sockets: their calls pass straight to the kernel.
 *
 * Per-descriptor state lives in a table indexed by descriptor whose chunks are allocated on
 * first use; lookups take a reference so that rclose() in one thread cannot free state
 * another thread is using.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "rsocket.h"

/* rsockets' own defaults, reported until the application sets them */
#define RS_DEFAULT_SQSIZE	384
#define RS_DEFAULT_RQSIZE	384
#define RS_DEFAULT_INLINE	64
#define RS_DEFAULT_IOMAPSIZE	0

#define RS_RING_SIZE		(256u * 1024)	/* stream data the progress thread may queue */
#define RS_FRAME_IOV_MAX	64		/* application buffers one frame gathers */
#define RS_DISCARD_CHUNK	4096
#define RS_FLUSH_TIMEOUT_MS	10000	/* rclose() stops waiting for a peer that reads nothing */
#define RS_POLL_STACK_FDS	16

#define RS_TABLE_CHUNK_SHIFT	10
#define RS_TABLE_CHUNK_LEN	(1 << RS_TABLE_CHUNK_SHIFT)
#define RS_TABLE_CHUNKS		1024
#define RS_TABLE_MAX_FD		(RS_TABLE_CHUNKS * RS_TABLE_CHUNK_LEN)

enum rs_conn_state {
	RS_STATE_IDLE,		/* new, bound, or after a failed connect */
	RS_STATE_LISTENING,
	RS_STATE_CONNECTING,	/* nonblocking connect() under way */
	RS_STATE_CONNECTED,
};

enum rs_rx_status {
	RS_RX_IDLE,		/* nothing more until bytes arrive */
	RS_RX_DATA,		/* inline: a DATA payload is next in the kernel's queue */
	RS_RX_FULL,		/* async: the ring has no room */
	RS_RX_EOF,
	RS_RX_ERROR,
};

struct rs_local_map {
	struct rs_local_map *next;
	uint8_t *buf;
	size_t len;
	uint64_t offset;
	bool remote_writable;
};

struct rs_remote_map {
	struct rs_remote_map *next;
	uint64_t offset;
	uint64_t len;
};

/* Where the receive side is in the incoming frames. */
struct rs_rx_parser {
	uint8_t hdr[RS_FRAME_HDR_LEN];
	size_t hdr_have;
	bool in_frame;
	uint8_t type;
	uint64_t left;		/* payload bytes of the current frame not consumed yet */
	uint64_t offset;	/* IOWRITE: where the next payload byte goes */
	uint8_t ctrl[RS_CTRL_PAYLOAD_LEN];
	size_t ctrl_have;
};

struct rsock {
	int fd;
	int type;
	atomic_int refs;
	atomic_bool closing;
	atomic_bool nonblocking;
	atomic_int state;

	pthread_mutex_t lock;	/* innermost lock: options and the progress thread */
	int sq_size;
	int rq_size;
	int inline_size;
	int iomap_size;		/* mappings the peer may announce to us */
	void *route;
	socklen_t route_len;
	bool progress_running;
	pthread_t progress;
	int wake_efd;		/* tells the progress thread to look again */
	int data_efd;		/* readable while a waiter must look again (see rs_rx_notify) */

	pthread_mutex_t tx_lock;	/* the fields below up to rx_lock: one sender at a time */
	uint8_t *backlog;
	size_t backlog_cap;
	size_t backlog_head;
	size_t backlog_tail;
	atomic_bool backlog_pending;
	int tx_err;
	bool tx_shut;

	pthread_mutex_t rx_lock;	/* the fields below; taken before tx_lock when both are */
	pthread_cond_t rx_cond;
	struct rs_rx_parser parser;
	atomic_bool rx_async;
	bool rx_stalled;
	bool rx_eof;
	bool rd_shut;
	int rx_err;
	bool peer_hello;
	uint32_t peer_iomap_size;
	uint8_t *ring;
	size_t ring_head;
	size_t ring_len;
	struct rs_local_map *local_maps;
	unsigned int local_writable_maps;
	struct rs_remote_map *remote_maps;
	unsigned int remote_map_count;
};

struct rs_iov_cursor {
	const struct iovec *iov;
	int iovcnt;
	int index;
	size_t offset;		/* into iov[index] */
};

static struct rsock **rs_table[RS_TABLE_CHUNKS];
static pthread_mutex_t rs_table_lock = PTHREAD_MUTEX_INITIALIZER;	/* rs_table; alone */

static int rs_fail(int err)
{
	errno = err;
	return -1;
}

static size_t rs_min(size_t a, size_t b)
{
	return a < b ? a : b;
}

static bool rs_would_block(int err)
{
	return err == EAGAIN || err == EWOULDBLOCK;
}

static void rs_eventfd_signal(int efd)
{
	if (efd >= 0 && eventfd_write(efd, 1)) {
		/* Fails only when the counter would overflow, which adding ones never does. */
	}
}

static void rs_eventfd_drain(int efd)
{
	eventfd_t count;

	if (efd >= 0 && eventfd_read(efd, &count)) {
		/* EAGAIN: already drained. */
	}
}

/* Waits for events on one descriptor; 0 when ready or timed out, else errno. */
static int rs_poll_one(int fd, short events, int timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = events };

	return poll(&pfd, 1, timeout_ms) < 0 ? errno : 0;
}

static int64_t rs_now_ms(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/* ---- the descriptor table ---- */

static void rs_release(struct rsock *rs)
{
	int saved_errno = errno;

	while (rs->local_maps) {
		struct rs_local_map *map = rs->local_maps;

		rs->local_maps = map->next;
		free(map);
	}
	while (rs->remote_maps) {
		struct rs_remote_map *map = rs->remote_maps;

		rs->remote_maps = map->next;
		free(map);
	}
	free(rs->ring);
	free(rs->backlog);
	free(rs->route);
	if (rs->data_efd >= 0)
		close(rs->data_efd);
	if (rs->wake_efd >= 0)
		close(rs->wake_efd);
	if (rs->fd >= 0)
		close(rs->fd);
	pthread_cond_destroy(&rs->rx_cond);
	pthread_mutex_destroy(&rs->rx_lock);
	pthread_mutex_destroy(&rs->tx_lock);
	pthread_mutex_destroy(&rs->lock);
	free(rs);
	errno = saved_errno;
}

/* Keeps errno: callers return the result of the call they made before letting go. */
static void rs_put(struct rsock *rs)
{
	if (rs && atomic_fetch_sub(&rs->refs, 1) == 1)
		rs_release(rs);
}

/*
 * With rs_table_lock: fd's slot in the table, its chunk allocated first when create; NULL
 * for an fd the table cannot hold, or a chunk that is missing (or cannot be allocated).
 */
static struct rsock **rs_slot(int fd, bool create)
{
	struct rsock ***chunk;

	if (fd < 0 || fd >= RS_TABLE_MAX_FD)
		return NULL;
	chunk = &rs_table[fd >> RS_TABLE_CHUNK_SHIFT];
	if (!*chunk && create)
		*chunk = calloc(RS_TABLE_CHUNK_LEN, sizeof(**chunk));
	return *chunk ? &(*chunk)[fd & (RS_TABLE_CHUNK_LEN - 1)] : NULL;
}

static struct rsock *rs_get(int fd)
{
	struct rsock *rs = NULL;
	struct rsock **slot;

	pthread_mutex_lock(&rs_table_lock);
	slot = rs_slot(fd, false);
	if (slot && (rs = *slot))
		atomic_fetch_add(&rs->refs, 1);
	pthread_mutex_unlock(&rs_table_lock);
	return rs;
}

static struct rsock *rs_table_remove(int fd)
{
	struct rsock *rs = NULL;
	struct rsock **slot;

	pthread_mutex_lock(&rs_table_lock);
	slot = rs_slot(fd, false);
	if (slot) {
		rs = *slot;
		*slot = NULL;
	}
	pthread_mutex_unlock(&rs_table_lock);
	return rs;
}

static void rs_stop_progress(struct rsock *rs)
{
	bool running;

	pthread_mutex_lock(&rs->lock);
	running = rs->progress_running;
	rs->progress_running = false;
	pthread_mutex_unlock(&rs->lock);
	if (running) {
		rs_eventfd_signal(rs->wake_efd);
		pthread_join(rs->progress, NULL);
	}
}

/*
 * The application closed an rsocket with close() rather than rclose(), and the kernel has
 * handed its number to a new rsocket: the old state lets go without touching the new socket.
 */
static void rs_forget_stale(struct rsock *stale)
{
	atomic_store(&stale->closing, true);
	rs_stop_progress(stale);
	stale->fd = -1;
	rs_put(stale);
}

static int rs_table_insert(struct rsock *rs)
{
	struct rsock **slot;
	struct rsock *stale;

	if (rs->fd >= RS_TABLE_MAX_FD)
		return EMFILE;
	pthread_mutex_lock(&rs_table_lock);
	slot = rs_slot(rs->fd, true);
	if (!slot) {
		pthread_mutex_unlock(&rs_table_lock);
		return ENOMEM;
	}
	stale = *slot;
	*slot = rs;
	pthread_mutex_unlock(&rs_table_lock);
	if (stale)
		rs_forget_stale(stale);
	return 0;
}

static struct rsock *rs_alloc(int fd, int type, struct rsock *listener)
{
	struct rsock *rs = calloc(1, sizeof(*rs));

	if (!rs)
		return NULL;
	rs->fd = fd;
	rs->type = type;
	atomic_init(&rs->refs, 1);
	atomic_init(&rs->state, RS_STATE_IDLE);
	rs->wake_efd = -1;
	rs->data_efd = -1;
	if (listener) {
		/* An accepted rsocket takes its sizes from the listener, as in rsockets. */
		pthread_mutex_lock(&listener->lock);
		rs->sq_size = listener->sq_size;
		rs->rq_size = listener->rq_size;
		rs->inline_size = listener->inline_size;
		rs->iomap_size = listener->iomap_size;
		pthread_mutex_unlock(&listener->lock);
	} else {
		rs->sq_size = RS_DEFAULT_SQSIZE;
		rs->rq_size = RS_DEFAULT_RQSIZE;
		rs->inline_size = RS_DEFAULT_INLINE;
		rs->iomap_size = RS_DEFAULT_IOMAPSIZE;
	}
	pthread_mutex_init(&rs->lock, NULL);
	pthread_mutex_init(&rs->tx_lock, NULL);
	pthread_mutex_init(&rs->rx_lock, NULL);
	pthread_cond_init(&rs->rx_cond, NULL);
	return rs;
}

static bool rs_nonblocking(struct rsock *rs, int flags)
{
	return (flags & MSG_DONTWAIT) || atomic_load(&rs->nonblocking);
}

/* ---- scatter/gather ---- */

static int rs_iov_total(const struct iovec *iov, int iovcnt, size_t *total)
{
	size_t sum = 0;

	if (iovcnt < 0 || iovcnt > IOV_MAX || (iovcnt && !iov))
		return EINVAL;
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len > (size_t)SSIZE_MAX - sum)
			return EINVAL;
		sum += iov[i].iov_len;
	}
	*total = sum;
	return 0;
}

static void rs_cursor_init(struct rs_iov_cursor *cursor, const struct iovec *iov, int iovcnt)
{
	cursor->iov = iov;
	cursor->iovcnt = iovcnt;
	cursor->index = 0;
	cursor->offset = 0;
}

static void rs_cursor_advance(struct rs_iov_cursor *cursor, size_t len)
{
	while (len && cursor->index < cursor->iovcnt) {
		size_t room = cursor->iov[cursor->index].iov_len - cursor->offset;

		if (len < room) {
			cursor->offset += len;
			return;
		}
		len -= room;
		cursor->index++;
		cursor->offset = 0;
	}
}

/* Describes up to *len bytes at the cursor in at most max slices; *len becomes what fit. */
static int rs_cursor_slices(const struct rs_iov_cursor *cursor, struct iovec *slices, int max,
			    size_t *len)
{
	size_t offset = cursor->offset;
	size_t have = 0;
	int count = 0;

	for (int i = cursor->index; i < cursor->iovcnt && have < *len && count < max; i++) {
		size_t room = cursor->iov[i].iov_len - offset;

		if (room) {
			slices[count].iov_base = (uint8_t *)cursor->iov[i].iov_base + offset;
			slices[count].iov_len = rs_min(room, *len - have);
			have += slices[count].iov_len;
			count++;
		}
		offset = 0;
	}
	*len = have;
	return count;
}

static void rs_cursor_copy_in(struct rs_iov_cursor *cursor, const uint8_t *src, size_t len)
{
	while (len) {
		struct iovec slice;
		size_t part = len;

		if (!rs_cursor_slices(cursor, &slice, 1, &part))
			return;
		memcpy(slice.iov_base, src, part);
		rs_cursor_advance(cursor, part);
		src += part;
		len -= part;
	}
}

/* ---- sending ---- */

static void rs_wire_hdr_init(struct rs_wire_hdr *hdr, uint8_t type, uint32_t len,
			     uint64_t offset)
{
	memset(hdr, 0, sizeof(*hdr));
	hdr->type = type;
	hdr->len = htobe32(len);
	hdr->offset = htobe64(offset);
}

static ssize_t rs_sendmsg(struct rsock *rs, const struct iovec *iov, int iovcnt, int flags)
{
	struct msghdr msg = { .msg_iov = (struct iovec *)iov, .msg_iovlen = iovcnt };
	ssize_t sent;

	/* An rsocket never raises SIGPIPE: its errors come back from the call. */
	do
		sent = sendmsg(rs->fd, &msg, flags | MSG_NOSIGNAL);
	while (sent < 0 && errno == EINTR && (flags & MSG_DONTWAIT));
	return sent;
}

static int rs_backlog_reserve(struct rsock *rs, size_t extra)
{
	size_t used = rs->backlog_tail - rs->backlog_head;
	uint8_t *grown;

	if (rs->backlog_head && rs->backlog_tail + extra > rs->backlog_cap) {
		memmove(rs->backlog, rs->backlog + rs->backlog_head, used);
		rs->backlog_head = 0;
		rs->backlog_tail = used;
	}
	if (rs->backlog_tail + extra <= rs->backlog_cap)
		return 0;
	grown = realloc(rs->backlog, rs->backlog_tail + extra);
	if (!grown)
		return ENOMEM;
	rs->backlog = grown;
	rs->backlog_cap = rs->backlog_tail + extra;
	return 0;
}

/* Keeps what the kernel did not take of a frame; room was reserved before sending it. */
static void rs_backlog_append(struct rsock *rs, const struct iovec *iov, int iovcnt,
			      size_t skip)
{
	for (int i = 0; i < iovcnt; i++) {
		if (skip >= iov[i].iov_len) {
			skip -= iov[i].iov_len;
			continue;
		}
		memcpy(rs->backlog + rs->backlog_tail, (uint8_t *)iov[i].iov_base + skip,
		       iov[i].iov_len - skip);
		rs->backlog_tail += iov[i].iov_len - skip;
		skip = 0;
	}
	atomic_store(&rs->backlog_pending, true);
}

/* tx_lock held. 0 once the backlog is on the wire, EAGAIN while the kernel is full. */
static int rs_backlog_flush(struct rsock *rs)
{
	while (rs->backlog_head < rs->backlog_tail) {
		ssize_t sent = send(rs->fd, rs->backlog + rs->backlog_head,
				    rs->backlog_tail - rs->backlog_head,
				    MSG_DONTWAIT | MSG_NOSIGNAL);

		if (sent < 0) {
			if (errno == EINTR)
				continue;
			if (rs_would_block(errno))
				return EAGAIN;
			/* The connection is gone; what is left can never be delivered. */
			rs->tx_err = errno;
			break;
		}
		rs->backlog_head += sent;
	}
	rs->backlog_head = 0;
	rs->backlog_tail = 0;
	atomic_store(&rs->backlog_pending, false);
	return rs->tx_err;
}

/*
 * tx_lock held. Used where rsockets wait for their sends to complete (rshutdown, rclose);
 * gives up if the peer takes nothing for RS_FLUSH_TIMEOUT_MS.
 */
static void rs_backlog_flush_bounded(struct rsock *rs)
{
	while (atomic_load(&rs->backlog_pending)) {
		struct pollfd pfd = { .fd = rs->fd, .events = POLLOUT };
		int ready;

		if (rs_backlog_flush(rs) != EAGAIN)
			return;
		ready = poll(&pfd, 1, RS_FLUSH_TIMEOUT_MS);
		if (ready == 0 || (ready < 0 && errno != EINTR)) {
			rs->backlog_head = 0;
			rs->backlog_tail = 0;
			atomic_store(&rs->backlog_pending, false);
			rs->tx_err = ETIMEDOUT;
			return;
		}
	}
}

static void *rs_progress_main(void *arg);

/* Starts the progress thread, or makes the running one look again at what it must do. */
static int rs_kick_progress(struct rsock *rs)
{
	sigset_t all_signals, saved;
	int err = 0;

	pthread_mutex_lock(&rs->lock);
	if (rs->progress_running) {
		rs_eventfd_signal(rs->wake_efd);
	} else if (!atomic_load(&rs->closing)) {
		if (rs->wake_efd < 0)
			rs->wake_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (rs->wake_efd < 0) {
			err = errno;
		} else {
			/* Signals belong to the application's threads, not to this one. */
			sigfillset(&all_signals);
			pthread_sigmask(SIG_SETMASK, &all_signals, &saved);
			err = pthread_create(&rs->progress, NULL, rs_progress_main, rs);
			pthread_sigmask(SIG_SETMASK, &saved, NULL);
			rs->progress_running = !err;
		}
	}
	pthread_mutex_unlock(&rs->lock);
	return err;
}

/* tx_lock held. A control frame goes out now if it can, else behind the backlog. */
static int rs_queue_ctrl(struct rsock *rs, uint8_t type, const void *payload)
{
	struct rs_wire_hdr hdr;
	struct iovec frame[2] = {
		{ .iov_base = &hdr, .iov_len = sizeof(hdr) },
		{ .iov_base = (void *)payload, .iov_len = RS_CTRL_PAYLOAD_LEN },
	};
	ssize_t sent = 0;
	int err;

	if (rs->tx_err)
		return rs->tx_err;
	if (rs->tx_shut)
		return EPIPE;
	err = rs_backlog_reserve(rs, sizeof(hdr) + RS_CTRL_PAYLOAD_LEN);
	if (err)
		return err;
	rs_wire_hdr_init(&hdr, type, RS_CTRL_PAYLOAD_LEN, 0);
	if (!atomic_load(&rs->backlog_pending)) {
		sent = rs_sendmsg(rs, frame, 2, MSG_DONTWAIT);
		if (sent < 0) {
			if (!rs_would_block(errno)) {
				rs->tx_err = errno;
				return errno;
			}
			sent = 0;
		}
	}
	if ((size_t)sent < sizeof(hdr) + RS_CTRL_PAYLOAD_LEN)
		rs_backlog_append(rs, frame, 2, sent);
	return 0;
}

/* tx_lock held. Nothing new may go out while part of an earlier frame has not. */
static int rs_tx_wait_backlog(struct rsock *rs, bool nonblock)
{
	for (;;) {
		int err;

		if (rs->tx_shut)
			return EPIPE;
		if (!atomic_load(&rs->backlog_pending))
			return rs->tx_err;
		err = rs_backlog_flush(rs);
		if (err != EAGAIN || nonblock)
			return err;
		pthread_mutex_unlock(&rs->tx_lock);
		err = rs_poll_one(rs->fd, POLLOUT, -1);
		pthread_mutex_lock(&rs->tx_lock);
		if (err)
			return err;
	}
}

/*
 * Sends total bytes as frames of the given type; IOWRITE frames carry the peer offset of
 * their first byte. Returns the payload bytes accepted, which includes the tail of a frame
 * the kernel took only in part: that tail is in the backlog and will follow.
 */
static ssize_t rs_send_frames(struct rsock *rs, uint8_t type, uint64_t offset,
			      const struct iovec *iov, int iovcnt, size_t total, int flags)
{
	bool nonblock = rs_nonblocking(rs, flags);
	struct rs_iov_cursor cursor;
	size_t done = 0;
	bool pending;
	int err;

	rs_cursor_init(&cursor, iov, iovcnt);
	pthread_mutex_lock(&rs->tx_lock);
	err = rs_tx_wait_backlog(rs, nonblock);
	while (!err && done < total) {
		struct iovec frame[1 + RS_FRAME_IOV_MAX];
		struct rs_wire_hdr hdr;
		size_t chunk = rs_min(total - done, RS_FRAME_MAX_PAYLOAD);
		size_t frame_len;
		int slices;
		ssize_t sent;

		slices = rs_cursor_slices(&cursor, frame + 1, RS_FRAME_IOV_MAX, &chunk);
		frame_len = sizeof(hdr) + chunk;
		rs_wire_hdr_init(&hdr, type, chunk, type == RS_FRAME_IOWRITE ? offset + done : 0);
		frame[0].iov_base = &hdr;
		frame[0].iov_len = sizeof(hdr);
		err = rs_backlog_reserve(rs, frame_len);
		if (err)
			break;
		sent = rs_sendmsg(rs, frame, slices + 1, nonblock ? MSG_DONTWAIT : 0);
		if (sent < 0) {
			err = errno;
			break;
		}
		done += chunk;
		if ((size_t)sent < frame_len) {
			rs_backlog_append(rs, frame, slices + 1, sent);
			break;
		}
		rs_cursor_advance(&cursor, chunk);
	}
	pending = atomic_load(&rs->backlog_pending);
	pthread_mutex_unlock(&rs->tx_lock);
	if (pending)
		rs_kick_progress(rs);
	if (done)
		return done;
	return rs_fail(err);
}

/* ---- receiving ---- */

/* Wakes whoever waits for stream data: rrecv() on rx_cond, rpoll() on data_efd. */
static void rs_rx_notify(struct rsock *rs)
{
	pthread_cond_broadcast(&rs->rx_cond);
	rs_eventfd_signal(rs->data_efd);
}

static ssize_t rs_recv_nowait(struct rsock *rs, void *buf, size_t len)
{
	ssize_t got;

	do
		got = recv(rs->fd, buf, len, MSG_DONTWAIT);
	while (got < 0 && errno == EINTR);
	return got;
}

/* What a recv() that returned got <= 0 means for the pump. */
static enum rs_rx_status rs_rx_stopped(struct rsock *rs, ssize_t got, bool at_frame_boundary)
{
	if (got == 0) {
		if (at_frame_boundary) {
			rs->rx_eof = true;
			rs_rx_notify(rs);
			return RS_RX_EOF;
		}
		/* The peer vanished in the middle of a frame it had reported as sent. */
		rs->rx_err = ECONNRESET;
	} else if (rs_would_block(errno)) {
		return RS_RX_IDLE;
	} else {
		rs->rx_err = errno;
	}
	rs_rx_notify(rs);
	return RS_RX_ERROR;
}

static bool rs_rx_frame_valid(struct rsock *rs, uint8_t type, uint64_t len)
{
	if (!rs->peer_hello && type != RS_FRAME_HELLO)
		return false;
	switch (type) {
	case RS_FRAME_HELLO:
		return !rs->peer_hello && len == RS_CTRL_PAYLOAD_LEN;
	case RS_FRAME_DATA:
	case RS_FRAME_IOWRITE:
		return len <= RS_FRAME_MAX_PAYLOAD;
	case RS_FRAME_IOMAP:
	case RS_FRAME_IOUNMAP:
		return len == RS_CTRL_PAYLOAD_LEN;
	default:
		return false;
	}
}

static void rs_rx_begin_frame(struct rsock *rs)
{
	struct rs_rx_parser *parser = &rs->parser;
	struct rs_wire_hdr hdr;

	memcpy(&hdr, parser->hdr, sizeof(hdr));
	parser->hdr_have = 0;
	parser->type = hdr.type;
	parser->left = be32toh(hdr.len);
	parser->offset = be64toh(hdr.offset);
	parser->ctrl_have = 0;
	if (!rs_rx_frame_valid(rs, parser->type, parser->left)) {
		/* Not an rsocket peer, or a broken one: nothing after this can be trusted. */
		rs->rx_err = EPROTO;
		rs_rx_notify(rs);
		return;
	}
	parser->in_frame = parser->left > 0;
}

static void rs_rx_consumed(struct rsock *rs, size_t len)
{
	rs->parser.left -= len;
	rs->parser.offset += len;
	if (!rs->parser.left)
		rs->parser.in_frame = false;
}

static void rs_rx_apply_ctrl(struct rsock *rs)
{
	struct rs_rx_parser *parser = &rs->parser;
	struct rs_wire_hello hello;
	struct rs_wire_iomap msg;
	struct rs_remote_map **link, *map;

	switch (parser->type) {
	case RS_FRAME_HELLO:
		memcpy(&hello, parser->ctrl, sizeof(hello));
		if (be32toh(hello.magic) != RS_WIRE_MAGIC ||
		    be16toh(hello.version) != RS_WIRE_VERSION) {
			rs->rx_err = EPROTO;
			rs_rx_notify(rs);
			return;
		}
		rs->peer_iomap_size = be32toh(hello.iomap_size);
		rs->peer_hello = true;
		pthread_cond_broadcast(&rs->rx_cond);
		return;
	case RS_FRAME_IOMAP:
		memcpy(&msg, parser->ctrl, sizeof(msg));
		/*
		 * The peer was told how many to announce; more, or a range that wraps, would be
		 * its bug. Ignored, so riowrite() refuses them.
		 */
		if (rs->remote_map_count >= (unsigned int)rs->iomap_size || !msg.len ||
		    be64toh(msg.len) > UINT64_MAX - be64toh(msg.offset))
			return;
		map = malloc(sizeof(*map));
		if (!map)
			return;
		map->offset = be64toh(msg.offset);
		map->len = be64toh(msg.len);
		map->next = rs->remote_maps;
		rs->remote_maps = map;
		rs->remote_map_count++;
		return;
	case RS_FRAME_IOUNMAP:
		memcpy(&msg, parser->ctrl, sizeof(msg));
		for (link = &rs->remote_maps; *link; link = &(*link)->next) {
			map = *link;
			if (map->offset == be64toh(msg.offset) && map->len == be64toh(msg.len)) {
				*link = map->next;
				free(map);
				rs->remote_map_count--;
				return;
			}
		}
		return;
	}
}

static struct rs_local_map *rs_find_writable_map(struct rsock *rs, uint64_t offset)
{
	for (struct rs_local_map *map = rs->local_maps; map; map = map->next)
		if (map->remote_writable && offset >= map->offset &&
		    offset - map->offset < map->len)
			return map;
	return NULL;
}

static ssize_t rs_rx_discard(struct rsock *rs)
{
	uint8_t scratch[RS_DISCARD_CHUNK];
	ssize_t got = rs_recv_nowait(rs, scratch, rs_min(rs->parser.left, sizeof(scratch)));

	if (got > 0)
		rs_rx_consumed(rs, got);
	return got;
}

/* IOWRITE payload goes straight into the mapped buffer, never through the stream. */
static ssize_t rs_rx_iowrite(struct rsock *rs)
{
	struct rs_local_map *map = rs_find_writable_map(rs, rs->parser.offset);
	size_t room;
	ssize_t got;

	/* Unmapped since the peer wrote: the bytes have nowhere to go. */
	if (!map)
		return rs_rx_discard(rs);
	room = map->offset + map->len - rs->parser.offset;
	got = rs_recv_nowait(rs, map->buf + (rs->parser.offset - map->offset),
			     rs_min(rs->parser.left, room));
	if (got > 0)
		rs_rx_consumed(rs, got);
	return got;
}

static ssize_t rs_rx_into_ring(struct rsock *rs)
{
	size_t tail = (rs->ring_head + rs->ring_len) % RS_RING_SIZE;
	size_t room = rs_min(RS_RING_SIZE - rs->ring_len, RS_RING_SIZE - tail);
	bool was_empty = !rs->ring_len;
	ssize_t got = rs_recv_nowait(rs, rs->ring + tail, rs_min(room, rs->parser.left));

	if (got > 0) {
		rs->ring_len += got;
		rs_rx_consumed(rs, got);
		if (was_empty)
			rs_rx_notify(rs);
	}
	return got;
}

static ssize_t rs_rx_ctrl(struct rsock *rs)
{
	struct rs_rx_parser *parser = &rs->parser;
	ssize_t got = rs_recv_nowait(rs, parser->ctrl + parser->ctrl_have,
				     RS_CTRL_PAYLOAD_LEN - parser->ctrl_have);

	if (got > 0) {
		parser->ctrl_have += got;
		rs_rx_consumed(rs, got);
		if (!parser->left)
			rs_rx_apply_ctrl(rs);
	}
	return got;
}

/*
 * rx_lock held. Consumes whatever the kernel holds without blocking: headers, control
 * frames and IOWRITE payloads always; DATA payloads only in async mode (into the ring). In
 * inline mode it stops in front of a DATA payload, which the reader takes itself.
 */
static enum rs_rx_status rs_rx_pump(struct rsock *rs)
{
	struct rs_rx_parser *parser = &rs->parser;
	ssize_t got;

	for (;;) {
		if (rs->rx_err)
			return RS_RX_ERROR;
		if (rs->rx_eof)
			return RS_RX_EOF;
		if (!parser->in_frame) {
			got = rs_recv_nowait(rs, parser->hdr + parser->hdr_have,
					     RS_FRAME_HDR_LEN - parser->hdr_have);
			if (got <= 0)
				return rs_rx_stopped(rs, got, parser->hdr_have == 0);
			parser->hdr_have += got;
			if (parser->hdr_have == RS_FRAME_HDR_LEN)
				rs_rx_begin_frame(rs);
			continue;
		}
		switch (parser->type) {
		case RS_FRAME_DATA:
			if (rs->rd_shut) {
				got = rs_rx_discard(rs);
			} else if (!atomic_load(&rs->rx_async)) {
				return RS_RX_DATA;
			} else if (rs->ring_len == RS_RING_SIZE) {
				rs->rx_stalled = true;
				return RS_RX_FULL;
			} else {
				got = rs_rx_into_ring(rs);
			}
			break;
		case RS_FRAME_IOWRITE:
			got = rs_rx_iowrite(rs);
			break;
		default:
			got = rs_rx_ctrl(rs);
			break;
		}
		if (got <= 0)
			return rs_rx_stopped(rs, got, false);
	}
}

/* rx_lock held, async mode. Copies queued stream data out; peeking leaves it queued. */
static size_t rs_ring_take(struct rsock *rs, struct rs_iov_cursor *cursor, size_t len, bool peek)
{
	size_t head = rs->ring_head;
	size_t avail = rs->ring_len;
	size_t done = 0;

	while (done < len && avail) {
		size_t part = rs_min(rs_min(avail, RS_RING_SIZE - head), len - done);

		rs_cursor_copy_in(cursor, rs->ring + head, part);
		head = (head + part) % RS_RING_SIZE;
		avail -= part;
		done += part;
	}
	if (peek || !done)
		return done;
	rs->ring_head = head;
	rs->ring_len = avail;
	if (rs->rx_stalled) {
		rs->rx_stalled = false;
		rs_eventfd_signal(rs->wake_efd);
	}
	if (!rs->ring_len && !rs->rx_eof && !rs->rx_err && !rs->rd_shut)
		rs_eventfd_drain(rs->data_efd);
	return done;
}

/* Inline mode: waits for the kernel, or for data_efd if the socket changes mode meanwhile. */
static int rs_wait_readable_inline(struct rsock *rs)
{
	struct pollfd pfd[2] = {
		{ .fd = rs->fd, .events = POLLIN },
		{ .fd = rs->data_efd, .events = POLLIN },
	};

	return poll(pfd, 2, -1) < 0 ? errno : 0;
}

/* rx_lock held, inline mode, a DATA payload next: read it into the caller's buffers. */
static ssize_t rs_recv_payload(struct rsock *rs, struct rs_iov_cursor *cursor, size_t len,
			       bool peek)
{
	struct iovec slices[RS_FRAME_IOV_MAX];
	struct msghdr msg = { .msg_iov = slices };
	ssize_t got;

	len = rs_min(len, rs->parser.left);
	msg.msg_iovlen = rs_cursor_slices(cursor, slices, RS_FRAME_IOV_MAX, &len);
	do
		got = recvmsg(rs->fd, &msg, MSG_DONTWAIT | (peek ? MSG_PEEK : 0));
	while (got < 0 && errno == EINTR);
	if (got > 0) {
		rs_cursor_advance(cursor, got);
		if (!peek)
			rs_rx_consumed(rs, got);
	}
	return got;
}

/* One step of rs_stream_recv() in inline mode; returns false when the caller must stop. */
static bool rs_recv_inline_step(struct rsock *rs, struct rs_iov_cursor *cursor, size_t want,
				bool peek, size_t *got, int *err)
{
	enum rs_rx_status status = rs_rx_pump(rs);
	ssize_t read;

	if (status == RS_RX_EOF)
		return false;
	if (status == RS_RX_ERROR) {
		*err = rs->rx_err;
		return false;
	}
	if (status != RS_RX_DATA) {
		*err = EAGAIN;
		return false;
	}
	read = rs_recv_payload(rs, cursor, want, peek);
	if (read > 0) {
		*got += read;
		return !peek;
	}
	if (read == 0)
		rs->rx_err = ECONNRESET;	/* a frame cut short: see rs_rx_stopped() */
	else if (!rs_would_block(errno))
		rs->rx_err = errno;
	else
		*err = EAGAIN;
	return !*err;
}

static ssize_t rs_stream_recv(struct rsock *rs, const struct iovec *iov, int iovcnt, int flags)
{
	bool nonblock = rs_nonblocking(rs, flags);
	bool peek = flags & MSG_PEEK;
	bool waitall = (flags & MSG_WAITALL) && !nonblock && !peek;
	struct rs_iov_cursor cursor;
	size_t total, got = 0;
	int err;

	if (flags & MSG_OOB)
		return rs_fail(EOPNOTSUPP);
	err = rs_iov_total(iov, iovcnt, &total);
	if (err)
		return rs_fail(err);
	if (!total)
		return 0;
	rs_cursor_init(&cursor, iov, iovcnt);

	pthread_mutex_lock(&rs->rx_lock);
	while (got < total) {
		err = 0;
		if (atomic_load(&rs->closing)) {
			err = EBADF;
			break;
		}
		if (rs->rd_shut)
			break;
		if (atomic_load(&rs->rx_async)) {
			size_t taken = rs_ring_take(rs, &cursor, total - got, peek);

			got += taken;
			if (peek && taken)
				break;
			if (taken)
				continue;
			/* Take what the kernel already holds rather than wait for the thread. */
			rs_rx_pump(rs);
			if (rs->ring_len)
				continue;
			if (rs->rx_err) {
				err = rs->rx_err;
				break;
			}
			if (rs->rx_eof || (got && !waitall))
				break;
			if (nonblock) {
				err = EAGAIN;
				break;
			}
			pthread_cond_wait(&rs->rx_cond, &rs->rx_lock);
			continue;
		}
		if (rs_recv_inline_step(rs, &cursor, total - got, peek, &got, &err))
			continue;
		if (err != EAGAIN || (got && !waitall) || nonblock)
			break;
		pthread_mutex_unlock(&rs->rx_lock);
		err = rs_wait_readable_inline(rs);
		pthread_mutex_lock(&rs->rx_lock);
		if (err)
			break;
	}
	pthread_mutex_unlock(&rs->rx_lock);
	if (got)
		return got;
	return err ? rs_fail(err) : 0;
}

/* Inline mode, for rpoll(): is there stream data (or an end) for rrecv() right now? */
static bool rs_inline_readable(struct rsock *rs, short kernel_revents)
{
	enum rs_rx_status status;
	uint8_t byte;

	if (rs->rd_shut || rs->rx_eof || rs->rx_err)
		return true;
	if (!(kernel_revents & (POLLIN | POLLERR | POLLHUP)))
		return false;
	status = rs_rx_pump(rs);
	if (status == RS_RX_DATA)
		return recv(rs->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) >= 0;
	return status == RS_RX_EOF || status == RS_RX_ERROR;
}

/* ---- the progress thread ---- */

static void *rs_progress_main(void *arg)
{
	struct rsock *rs = arg;

	while (!atomic_load(&rs->closing)) {
		bool want_tx = atomic_load(&rs->backlog_pending);
		struct pollfd pfd[2];
		bool want_rx;

		pthread_mutex_lock(&rs->rx_lock);
		want_rx = atomic_load(&rs->rx_async) && !rs->rx_stalled && !rs->rx_eof &&
			  !rs->rx_err;
		pthread_mutex_unlock(&rs->rx_lock);

		/* With nothing to do, an error or hangup on the socket must not spin us. */
		pfd[0].fd = want_tx || want_rx ? rs->fd : -1;
		pfd[0].events = (want_tx ? POLLOUT : 0) | (want_rx ? POLLIN : 0);
		pfd[0].revents = 0;
		pfd[1].fd = rs->wake_efd;
		pfd[1].events = POLLIN;
		pfd[1].revents = 0;
		if (poll(pfd, 2, -1) < 0)
			continue;
		if (pfd[1].revents)
			rs_eventfd_drain(rs->wake_efd);
		if (want_tx && (pfd[0].revents & (POLLOUT | POLLERR | POLLHUP))) {
			pthread_mutex_lock(&rs->tx_lock);
			rs_backlog_flush(rs);
			pthread_mutex_unlock(&rs->tx_lock);
		}
		if (want_rx && (pfd[0].revents & (POLLIN | POLLERR | POLLHUP))) {
			pthread_mutex_lock(&rs->rx_lock);
			rs_rx_pump(rs);
			pthread_mutex_unlock(&rs->rx_lock);
		}
	}
	return NULL;
}

/* ---- connection state ---- */

/*
 * Every frame may depend on HELLO, so HELLO is queued under tx_lock before any sender can
 * see the socket connected.
 */
static void rs_mark_connected(struct rsock *rs)
{
	struct rs_wire_hello hello = {
		.magic = htobe32(RS_WIRE_MAGIC),
		.version = htobe16(RS_WIRE_VERSION),
	};
	bool pending;

	pthread_mutex_lock(&rs->tx_lock);
	pthread_mutex_lock(&rs->lock);
	if (atomic_load(&rs->state) == RS_STATE_CONNECTED) {
		pthread_mutex_unlock(&rs->lock);
		pthread_mutex_unlock(&rs->tx_lock);
		return;
	}
	hello.iomap_size = htobe32(rs->iomap_size);
	atomic_store(&rs->state, RS_STATE_CONNECTED);
	pthread_mutex_unlock(&rs->lock);
	rs_queue_ctrl(rs, RS_FRAME_HELLO, &hello);
	pending = atomic_load(&rs->backlog_pending);
	pthread_mutex_unlock(&rs->tx_lock);
	if (pending)
		rs_kick_progress(rs);
}

/* Notices a nonblocking connect() that has finished; returns the state. */
static int rs_update_state(struct rsock *rs)
{
	int state = atomic_load(&rs->state);
	struct sockaddr_storage peer;
	socklen_t len = sizeof(peer);
	struct pollfd pfd = { .fd = rs->fd, .events = POLLOUT };

	if (state != RS_STATE_CONNECTING || poll(&pfd, 1, 0) <= 0)
		return state;
	if (!getpeername(rs->fd, (struct sockaddr *)&peer, &len)) {
		rs_mark_connected(rs);
		return RS_STATE_CONNECTED;
	}
	/* Failed: SO_ERROR still says why, for the application to read. */
	atomic_compare_exchange_strong(&rs->state, &state, RS_STATE_IDLE);
	return atomic_load(&rs->state);
}

static int rs_wait_connected(struct rsock *rs, bool nonblock)
{
	for (;;) {
		int state = rs_update_state(rs);
		int err;

		if (state == RS_STATE_CONNECTED)
			return 0;
		if (state != RS_STATE_CONNECTING)
			return ENOTCONN;
		if (nonblock)
			return EAGAIN;
		err = rs_poll_one(rs->fd, POLLOUT, -1);
		if (err)
			return err;
	}
}

/* The descriptor waiters poll alongside the socket; made before it can be needed. */
static int rs_prepare_connection(struct rsock *rs)
{
	int err = 0;

	pthread_mutex_lock(&rs->lock);
	if (rs->data_efd < 0) {
		rs->data_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (rs->data_efd < 0)
			err = errno;
	}
	pthread_mutex_unlock(&rs->lock);
	return err;
}

/* ---- sockets ---- */

int rsocket(int domain, int type, int protocol)
{
	int kind = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
	int nodelay = 1;
	struct rsock *rs;
	int fd, err;

	if ((domain != AF_INET && domain != AF_INET6) ||
	    (kind != SOCK_STREAM && kind != SOCK_DGRAM) ||
	    (kind == SOCK_STREAM && protocol && protocol != IPPROTO_TCP) ||
	    (kind == SOCK_DGRAM && protocol && protocol != IPPROTO_UDP))
		return rs_fail(ENOTSUP);
	fd = socket(domain, type, protocol);
	if (fd < 0)
		return -1;
	/*
	 * An rsocket posts each send at once; Nagle would hold small frames back behind
	 * unacknowledged data. rsetsockopt(TCP_NODELAY, 0) still turns it back on.
	 */
	if (kind == SOCK_STREAM)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &nodelay, sizeof(nodelay));
	rs = rs_alloc(fd, kind, NULL);
	if (!rs) {
		close(fd);
		return rs_fail(ENOMEM);
	}
	atomic_store(&rs->nonblocking, (type & SOCK_NONBLOCK) != 0);
	err = rs_table_insert(rs);
	if (err) {
		rs_put(rs);
		return rs_fail(err);
	}
	return fd;
}

int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	struct rsock *rs = rs_get(socket);
	int ret;

	if (!rs)
		return rs_fail(EBADF);
	ret = bind(rs->fd, addr, addrlen);
	rs_put(rs);
	return ret;
}

int rlisten(int socket, int backlog)
{
	struct rsock *rs = rs_get(socket);
	int ret;

	if (!rs)
		return rs_fail(EBADF);
	ret = listen(rs->fd, backlog);
	if (!ret && rs->type == SOCK_STREAM)
		atomic_store(&rs->state, RS_STATE_LISTENING);
	rs_put(rs);
	return ret;
}

int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rsock *listener = rs_get(socket);
	struct rsock *rs;
	int fd, err;

	if (!listener)
		return rs_fail(EBADF);
	fd = accept(listener->fd, addr, addrlen);
	if (fd < 0) {
		err = errno;
		rs_put(listener);
		return rs_fail(err);
	}
	rs = rs_alloc(fd, SOCK_STREAM, listener);
	rs_put(listener);
	if (!rs) {
		close(fd);
		return rs_fail(ENOMEM);
	}
	err = rs_prepare_connection(rs);
	if (!err) {
		rs_mark_connected(rs);
		err = rs_table_insert(rs);
	}
	if (err) {
		rs_put(rs);
		return rs_fail(err);
	}
	return fd;
}

int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	struct rsock *rs = rs_get(socket);
	int ret, err;

	if (!rs)
		return rs_fail(EBADF);
	if (rs->type != SOCK_STREAM) {
		ret = connect(rs->fd, addr, addrlen);
		rs_put(rs);
		return ret;
	}
	err = rs_prepare_connection(rs);
	if (err) {
		rs_put(rs);
		return rs_fail(err);
	}
	ret = connect(rs->fd, addr, addrlen);
	err = ret ? errno : 0;
	if (!ret) {
		rs_mark_connected(rs);
	} else if (err == EINPROGRESS || err == EINTR || err == EALREADY) {
		/* The kernel goes on connecting; rpoll() or the next call notices the end. */
		int idle = RS_STATE_IDLE;

		atomic_compare_exchange_strong(&rs->state, &idle, RS_STATE_CONNECTING);
	} else if (err == EISCONN && atomic_load(&rs->state) == RS_STATE_CONNECTING) {
		rs_mark_connected(rs);
	}
	rs_put(rs);
	if (ret)
		errno = err;	/* rs_mark_connected() may have touched it */
	return ret;
}

int rshutdown(int socket, int how)
{
	struct rsock *rs = rs_get(socket);
	int ret = 0;

	if (!rs)
		return rs_fail(EBADF);
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) {
		rs_put(rs);
		return rs_fail(EINVAL);
	}
	if (rs->type != SOCK_STREAM || rs_update_state(rs) != RS_STATE_CONNECTED) {
		ret = shutdown(rs->fd, how);
		rs_put(rs);
		return ret;
	}
	if (how != SHUT_WR) {
		/*
		 * Only locally, as in rsockets: a kernel SHUT_RD would also end the
		 * riowrite() data that keeps arriving for this side's mappings.
		 */
		pthread_mutex_lock(&rs->rx_lock);
		rs->rd_shut = true;
		rs_rx_notify(rs);
		pthread_mutex_unlock(&rs->rx_lock);
	}
	if (how != SHUT_RD) {
		pthread_mutex_lock(&rs->tx_lock);
		rs_backlog_flush_bounded(rs);
		rs->tx_shut = true;
		pthread_mutex_unlock(&rs->tx_lock);
		ret = shutdown(rs->fd, how);
	}
	rs_put(rs);
	return ret;
}

int rclose(int socket)
{
	struct rsock *rs = rs_table_remove(socket);

	if (!rs)
		return rs_fail(EBADF);
	atomic_store(&rs->closing, true);
	if (rs->type == SOCK_STREAM) {
		/* Other threads blocked on this rsocket return EBADF. */
		pthread_mutex_lock(&rs->rx_lock);
		rs_rx_notify(rs);
		pthread_mutex_unlock(&rs->rx_lock);
		rs_stop_progress(rs);
		if (atomic_load(&rs->state) == RS_STATE_CONNECTED) {
			pthread_mutex_lock(&rs->tx_lock);
			rs_backlog_flush_bounded(rs);
			pthread_mutex_unlock(&rs->tx_lock);
		}
	}
	/* The socket itself closes with the last reference, when no call is using it. */
	rs_put(rs);
	return 0;
}

/* ---- data transfer ---- */

static ssize_t rs_stream_send(struct rsock *rs, const struct iovec *iov, int iovcnt, int flags)
{
	size_t total;
	int err;

	if (flags & MSG_OOB)
		return rs_fail(EOPNOTSUPP);
	err = rs_iov_total(iov, iovcnt, &total);
	if (!err)
		err = rs_wait_connected(rs, rs_nonblocking(rs, flags));
	if (err)
		return rs_fail(err);
	if (!total)
		return 0;
	return rs_send_frames(rs, RS_FRAME_DATA, 0, iov, iovcnt, total, flags);
}

static ssize_t rs_sendv(int socket, const struct iovec *iov, int iovcnt, int flags)
{
	struct rsock *rs = rs_get(socket);
	ssize_t ret;

	if (!rs)
		return rs_fail(EBADF);
	if (rs->type == SOCK_STREAM) {
		ret = rs_stream_send(rs, iov, iovcnt, flags);
	} else {
		struct msghdr msg = { .msg_iov = (struct iovec *)iov, .msg_iovlen = iovcnt };

		ret = sendmsg(rs->fd, &msg, flags);
	}
	rs_put(rs);
	return ret;
}

static ssize_t rs_recvv(int socket, const struct iovec *iov, int iovcnt, int flags)
{
	struct rsock *rs = rs_get(socket);
	ssize_t ret;
	int err;

	if (!rs)
		return rs_fail(EBADF);
	if (rs->type != SOCK_STREAM) {
		struct msghdr msg = { .msg_iov = (struct iovec *)iov, .msg_iovlen = iovcnt };

		ret = recvmsg(rs->fd, &msg, flags);
	} else {
		err = rs_wait_connected(rs, rs_nonblocking(rs, flags));
		ret = err ? rs_fail(err) : rs_stream_recv(rs, iov, iovcnt, flags);
	}
	rs_put(rs);
	return ret;
}

ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };

	return rs_recvv(socket, &iov, 1, flags);
}

ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags,
		  struct sockaddr *src_addr, socklen_t *addrlen)
{
	struct rsock *rs = rs_get(socket);
	ssize_t ret;

	if (!rs)
		return rs_fail(EBADF);
	if (rs->type != SOCK_STREAM) {
		ret = recvfrom(rs->fd, buf, len, flags, src_addr, addrlen);
	} else {
		ret = rrecv(socket, buf, len, flags);
		/* rsockets report the peer as the source of stream data. */
		if (ret > 0 && src_addr && addrlen)
			getpeername(rs->fd, src_addr, addrlen);
	}
	rs_put(rs);
	return ret;
}

ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{
	struct rsock *rs = rs_get(socket);
	ssize_t ret;

	if (!rs)
		return rs_fail(EBADF);
	if (rs->type != SOCK_STREAM) {
		ret = recvmsg(rs->fd, msg, flags);
	} else if (msg->msg_control && msg->msg_controllen) {
		ret = rs_fail(ENOTSUP);
	} else {
		ret = rs_recvv(socket, msg->msg_iov, msg->msg_iovlen, flags);
		if (ret >= 0) {
			msg->msg_namelen = 0;
			msg->msg_flags = 0;
		}
	}
	rs_put(rs);
	return ret;
}

ssize_t rread(int socket, void *buf, size_t count)
{
	return rrecv(socket, buf, count, 0);
}

ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)
{
	return rs_recvv(socket, iov, iovcnt, 0);
}

ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };

	return rs_sendv(socket, &iov, 1, flags);
}

ssize_t rsendto(int socket, const void *buf, size_t len, int flags,
		const struct sockaddr *dest_addr, socklen_t addrlen)
{
	struct rsock *rs = rs_get(socket);
	ssize_t ret;

	if (!rs)
		return rs_fail(EBADF);
	if (rs->type != SOCK_STREAM)
		ret = sendto(rs->fd, buf, len, flags, dest_addr, addrlen);
	else if (dest_addr || addrlen)
		ret = rs_fail(EISCONN);
	else
		ret = rsend(socket, buf, len, flags);
	rs_put(rs);
	return ret;
}

ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{
	struct rsock *rs = rs_get(socket);
	ssize_t ret;

	if (!rs)
		return rs_fail(EBADF);
	if (rs->type != SOCK_STREAM)
		ret = sendmsg(rs->fd, msg, flags);
	else if (msg->msg_control && msg->msg_controllen)
		ret = rs_fail(ENOTSUP);
	else
		ret = rs_sendv(socket, msg->msg_iov, msg->msg_iovlen, flags);
	rs_put(rs);
	return ret;
}

ssize_t rwrite(int socket, const void *buf, size_t count)
{
	return rsend(socket, buf, count, 0);
}

ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)
{
	return rs_sendv(socket, iov, iovcnt, 0);
}

/* ---- polling ---- */

/*
 * Each caller's pollfd becomes two kernel ones: the socket, and the data_efd that says the
 * progress thread queued stream data (or that the socket changed mode under a waiter).
 */
static void rs_poll_prepare(struct rsock *rs, const struct pollfd *user, struct pollfd *kernel)
{
	int state;

	kernel[0] = (struct pollfd){ .fd = user->fd, .events = user->events };
	kernel[1] = (struct pollfd){ .fd = -1 };
	if (!rs || rs->type != SOCK_STREAM)
		return;
	state = atomic_load(&rs->state);
	if (state == RS_STATE_CONNECTING) {
		kernel[0].events = POLLOUT;
		return;
	}
	if (state != RS_STATE_CONNECTED)
		return;
	kernel[0].events = user->events & POLLOUT;
	if (user->events & (POLLIN | POLLRDHUP)) {
		if (!atomic_load(&rs->rx_async))
			kernel[0].events |= POLLIN | (user->events & POLLRDHUP);
		kernel[1] = (struct pollfd){ .fd = rs->data_efd, .events = POLLIN };
	}
}

static short rs_poll_connected(struct rsock *rs, short events, short kernel_revents,
			       short efd_revents)
{
	short revents = kernel_revents & (POLLERR | POLLHUP | POLLNVAL);
	bool readable, rdhup;

	if ((events & POLLOUT) && (kernel_revents & POLLOUT)) {
		pthread_mutex_lock(&rs->tx_lock);
		if (atomic_load(&rs->backlog_pending))
			rs_backlog_flush(rs);
		if (!atomic_load(&rs->backlog_pending))
			revents |= POLLOUT;
		pthread_mutex_unlock(&rs->tx_lock);
	}
	if (!(events & (POLLIN | POLLRDHUP)))
		return revents;
	pthread_mutex_lock(&rs->rx_lock);
	if (atomic_load(&rs->rx_async)) {
		readable = rs->ring_len || rs->rx_eof || rs->rx_err || rs->rd_shut;
		if (!readable && efd_revents)
			rs_eventfd_drain(rs->data_efd);
		rdhup = rs->rx_eof || rs->rd_shut;
	} else {
		readable = rs_inline_readable(rs, kernel_revents);
		rdhup = (kernel_revents & POLLRDHUP) || rs->rx_eof || rs->rd_shut;
	}
	pthread_mutex_unlock(&rs->rx_lock);
	if (readable && (events & POLLIN))
		revents |= POLLIN;
	if (rdhup && (events & POLLRDHUP))
		revents |= POLLRDHUP;
	return revents;
}

static short rs_poll_collect(struct rsock *rs, const struct pollfd *user,
			     const struct pollfd *kernel)
{
	int state;

	if (!rs || rs->type != SOCK_STREAM)
		return kernel[0].revents;
	state = atomic_load(&rs->state);
	if (state == RS_STATE_CONNECTING) {
		if (!kernel[0].revents)
			return 0;
		if (rs_update_state(rs) != RS_STATE_CONNECTED)
			return kernel[0].revents & (user->events | POLLERR | POLLHUP | POLLNVAL);
		/* Just connected: only writability is known; the next round looks at data. */
		return kernel[0].revents & user->events & POLLOUT;
	}
	if (state != RS_STATE_CONNECTED)
		return kernel[0].revents;
	return rs_poll_connected(rs, user->events, kernel[0].revents, kernel[1].revents);
}

int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	struct pollfd stack_kernel[2 * RS_POLL_STACK_FDS];
	struct rsock *stack_rss[RS_POLL_STACK_FDS];
	struct pollfd *kernel = stack_kernel;
	struct rsock **rss = stack_rss;
	int64_t deadline = timeout > 0 ? rs_now_ms() + timeout : 0;
	int wait_ms = 0;
	int ret, err = 0;

	if (nfds > RS_TABLE_MAX_FD)
		return rs_fail(EINVAL);
	if (nfds > RS_POLL_STACK_FDS) {
		kernel = calloc(2 * nfds, sizeof(*kernel));
		rss = calloc(nfds, sizeof(*rss));
		if (!kernel || !rss) {
			free(kernel);
			free(rss);
			return rs_fail(ENOMEM);
		}
	}
	for (nfds_t i = 0; i < nfds; i++)
		rss[i] = rs_get(fds[i].fd);

	/*
	 * Kernel readiness can be about frames the application never sees (HELLO, IOMAP, a
	 * header whose payload is still on its way), so poll until a caller's event is real.
	 */
	for (;;) {
		int ready = 0;

		for (nfds_t i = 0; i < nfds; i++)
			rs_poll_prepare(rss[i], &fds[i], &kernel[2 * i]);
		if (poll(kernel, 2 * nfds, wait_ms) < 0) {
			err = errno;
			ret = -1;
			break;
		}
		for (nfds_t i = 0; i < nfds; i++) {
			fds[i].revents = rs_poll_collect(rss[i], &fds[i], &kernel[2 * i]);
			if (fds[i].revents)
				ready++;
		}
		ret = ready;
		if (ready || !timeout)
			break;
		if (timeout > 0) {
			int64_t left = deadline - rs_now_ms();

			if (left <= 0)
				break;
			wait_ms = left > INT_MAX ? INT_MAX : (int)left;
		} else {
			wait_ms = -1;
		}
	}

	for (nfds_t i = 0; i < nfds; i++)
		rs_put(rss[i]);
	if (kernel != stack_kernel) {
		free(kernel);
		free(rss);
	}
	if (ret < 0)
		errno = err;
	return ret;
}

int rselect(int nfds, fd_set *readfds, fd_set *writefds,
	    fd_set *exceptfds, struct timeval *timeout)
{
	struct pollfd *fds;
	int count = 0, ready = 0, timeout_ms = -1;

	if (nfds < 0 || nfds > FD_SETSIZE)
		return rs_fail(EINVAL);
	if (timeout) {
		if (timeout->tv_sec < 0 || timeout->tv_usec < 0)
			return rs_fail(EINVAL);
		/* Rounded up: select() may not return before its timeout. */
		if (timeout->tv_sec > INT_MAX / 1000 - 1)
			timeout_ms = INT_MAX;
		else
			timeout_ms = timeout->tv_sec * 1000 + (timeout->tv_usec + 999) / 1000;
	}
	fds = calloc(nfds ? nfds : 1, sizeof(*fds));
	if (!fds)
		return rs_fail(ENOMEM);
	for (int fd = 0; fd < nfds; fd++) {
		short events = 0;

		if (readfds && FD_ISSET(fd, readfds))
			events |= POLLIN;
		if (writefds && FD_ISSET(fd, writefds))
			events |= POLLOUT;
		if (exceptfds && FD_ISSET(fd, exceptfds))
			events |= POLLPRI;
		if (events)
			fds[count++] = (struct pollfd){ .fd = fd, .events = events };
	}
	ready = rpoll(fds, count, timeout_ms);
	if (ready < 0) {
		free(fds);
		return -1;
	}
	for (int i = 0; i < count; i++) {
		if (fds[i].revents & POLLNVAL) {
			free(fds);
			return rs_fail(EBADF);
		}
	}
	if (readfds)
		FD_ZERO(readfds);
	if (writefds)
		FD_ZERO(writefds);
	if (exceptfds)
		FD_ZERO(exceptfds);
	ready = 0;
	for (int i = 0; i < count; i++) {
		short revents = fds[i].revents;

		/* The sets select() itself reports these conditions in. */
		if ((fds[i].events & POLLIN) && (revents & (POLLIN | POLLHUP | POLLERR))) {
			FD_SET(fds[i].fd, readfds);
			ready++;
		}
		if ((fds[i].events & POLLOUT) && (revents & (POLLOUT | POLLERR))) {
			FD_SET(fds[i].fd, writefds);
			ready++;
		}
		if ((fds[i].events & POLLPRI) && (revents & POLLPRI)) {
			FD_SET(fds[i].fd, exceptfds);
			ready++;
		}
	}
	free(fds);
	return ready;
}

/* ---- names and options ---- */

/* getpeername(2) (peer) or getsockname(2) of the TCP socket behind an rsocket. */
static int rs_name(int socket, bool peer, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rsock *rs = rs_get(socket);
	int ret;

	if (!rs)
		return rs_fail(EBADF);
	ret = peer ? getpeername(rs->fd, addr, addrlen) : getsockname(rs->fd, addr, addrlen);
	rs_put(rs);
	return ret;
}

int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	return rs_name(socket, true, addr, addrlen);
}

int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	return rs_name(socket, false, addr, addrlen);
}

static int *rs_sol_rdma_int(struct rsock *rs, int optname)
{
	switch (optname) {
	case RDMA_SQSIZE:
		return &rs->sq_size;
	case RDMA_RQSIZE:
		return &rs->rq_size;
	case RDMA_INLINE:
		return &rs->inline_size;
	case RDMA_IOMAPSIZE:
		return &rs->iomap_size;
	default:
		return NULL;
	}
}

/*
 * There are no queues to size, but the values are kept and reported back. As in rsockets
 * they are fixed once a connection starts: RDMA_IOMAPSIZE has been sent in HELLO by then.
 */
static int rs_set_sol_rdma(struct rsock *rs, int optname, const void *optval, socklen_t optlen)
{
	int *value = rs_sol_rdma_int(rs, optname);
	int err = 0;
	void *route;

	if (!value && optname != RDMA_ROUTE)
		return ENOPROTOOPT;
	if (!optval || !optlen || (value && optlen < sizeof(int)))
		return EINVAL;
	if (value && *(const int *)optval < 0)
		return EINVAL;
	pthread_mutex_lock(&rs->lock);
	if (atomic_load(&rs->state) >= RS_STATE_CONNECTING) {
		err = EINVAL;
	} else if (value) {
		*value = *(const int *)optval;
	} else {
		route = malloc(optlen);
		if (!route) {
			err = ENOMEM;
		} else {
			memcpy(route, optval, optlen);
			free(rs->route);
			rs->route = route;
			rs->route_len = optlen;
		}
	}
	pthread_mutex_unlock(&rs->lock);
	return err;
}

static int rs_get_sol_rdma(struct rsock *rs, int optname, void *optval, socklen_t *optlen)
{
	int *value = rs_sol_rdma_int(rs, optname);
	int err = 0;

	if (!value && optname != RDMA_ROUTE)
		return ENOPROTOOPT;
	if (!optval || !optlen)
		return EINVAL;
	pthread_mutex_lock(&rs->lock);
	if (value) {
		if (*optlen < sizeof(int)) {
			err = EINVAL;
		} else {
			memcpy(optval, value, sizeof(int));
			*optlen = sizeof(int);
		}
	} else if (*optlen < rs->route_len) {
		err = EINVAL;
	} else {
		/* Without one set, there is no path record: the route is the kernel's. */
		if (rs->route_len)
			memcpy(optval, rs->route, rs->route_len);
		*optlen = rs->route_len;
	}
	pthread_mutex_unlock(&rs->lock);
	return err;
}

/* setsockopt(2) (set: optval is read only) or getsockopt(2): SOL_RDMA is ours, the rest the
 * TCP socket's. */
static int rs_sockopt(int socket, int level, int optname, bool set, void *optval,
		      socklen_t *optlen)
{
	struct rsock *rs = rs_get(socket);
	int ret, err;

	if (!rs)
		return rs_fail(EBADF);
	if (level == SOL_RDMA) {
		err = set ? rs_set_sol_rdma(rs, optname, optval, *optlen) :
			    rs_get_sol_rdma(rs, optname, optval, optlen);
		ret = err ? rs_fail(err) : 0;
	} else if (set) {
		ret = setsockopt(rs->fd, level, optname, optval, *optlen);
	} else {
		ret = getsockopt(rs->fd, level, optname, optval, optlen);
	}
	rs_put(rs);
	return ret;
}

int rsetsockopt(int socket, int level, int optname, const void *optval, socklen_t optlen)
{
	return rs_sockopt(socket, level, optname, true, (void *)optval, &optlen);
}

int rgetsockopt(int socket, int level, int optname, void *optval, socklen_t *optlen)
{
	return rs_sockopt(socket, level, optname, false, optval, optlen);
}

int rfcntl(int socket, int cmd, ... /* arg */)
{
	struct rsock *rs = rs_get(socket);
	int ret, flags;
	va_list args;

	if (!rs)
		return rs_fail(EBADF);
	switch (cmd) {
	case F_GETFL:
		ret = fcntl(rs->fd, F_GETFL);
		break;
	case F_SETFL:
		va_start(args, cmd);
		flags = va_arg(args, int);
		va_end(args);
		/* Only O_NONBLOCK means anything to an rsocket. */
		ret = fcntl(rs->fd, F_GETFL);
		if (ret >= 0)
			ret = fcntl(rs->fd, F_SETFL, (ret & ~O_NONBLOCK) | (flags & O_NONBLOCK));
		if (!ret)
			atomic_store(&rs->nonblocking, (flags & O_NONBLOCK) != 0);
		break;
	default:
		ret = rs_fail(ENOTSUP);
		break;
	}
	rs_put(rs);
	return ret;
}

/* ---- direct data placement ---- */

/*
 * rx_lock held. The peer's HELLO says how many mappings it can take; it is the peer's first
 * frame, sent as it connects, so this waits even on a nonblocking socket, as rsockets have
 * it in hand once connected.
 */
static int rs_wait_peer_hello(struct rsock *rs)
{
	while (!rs->peer_hello) {
		enum rs_rx_status status;
		int err;

		if (atomic_load(&rs->closing))
			return EBADF;
		if (atomic_load(&rs->rx_async)) {
			if (rs->rx_err)
				return rs->rx_err;
			if (rs->rx_eof)
				return ECONNRESET;
			pthread_cond_wait(&rs->rx_cond, &rs->rx_lock);
			continue;
		}
		status = rs_rx_pump(rs);
		if (rs->peer_hello)
			break;
		if (status == RS_RX_ERROR)
			return rs->rx_err;
		if (status == RS_RX_EOF)
			return ECONNRESET;
		pthread_mutex_unlock(&rs->rx_lock);
		err = rs_wait_readable_inline(rs);
		pthread_mutex_lock(&rs->rx_lock);
		if (err)
			return err;
	}
	return 0;
}

/* rx_lock held. From here on the progress thread reads everything the peer sends. */
static int rs_start_async_rx(struct rsock *rs)
{
	int err;

	rs->ring = malloc(RS_RING_SIZE);
	if (!rs->ring)
		return ENOMEM;
	atomic_store(&rs->rx_async, true);
	err = rs_kick_progress(rs);
	if (err) {
		atomic_store(&rs->rx_async, false);
		free(rs->ring);
		rs->ring = NULL;
		return err;
	}
	/* Inline readers poll the socket the thread now drains: send them to the ring. */
	rs_eventfd_signal(rs->data_efd);
	return 0;
}

static void rs_unlink_local_map(struct rsock *rs, struct rs_local_map *target)
{
	for (struct rs_local_map **link = &rs->local_maps; *link; link = &(*link)->next) {
		if (*link == target) {
			*link = target->next;
			if (target->remote_writable)
				rs->local_writable_maps--;
			return;
		}
	}
}

static int rs_announce_map(struct rsock *rs, uint8_t type, const struct rs_local_map *map)
{
	struct rs_wire_iomap msg = {
		.offset = htobe64(map->offset),
		.len = htobe64(map->len),
	};
	bool pending;
	int err;

	pthread_mutex_lock(&rs->tx_lock);
	err = rs_queue_ctrl(rs, type, &msg);
	pending = atomic_load(&rs->backlog_pending);
	pthread_mutex_unlock(&rs->tx_lock);
	if (pending)
		rs_kick_progress(rs);
	return err;
}

static int rs_add_writable_map(struct rsock *rs, struct rs_local_map *map)
{
	int err;

	pthread_mutex_lock(&rs->rx_lock);
	err = rs_wait_peer_hello(rs);
	if (!err && rs->local_writable_maps >= rs->peer_iomap_size)
		err = ENOMEM;	/* as rsockets, when the peer's iomap table is full */
	if (!err && !atomic_load(&rs->rx_async))
		err = rs_start_async_rx(rs);
	if (!err) {
		/* Mapped before it is announced: no write can arrive for it too early. */
		map->next = rs->local_maps;
		rs->local_maps = map;
		rs->local_writable_maps++;
	}
	pthread_mutex_unlock(&rs->rx_lock);
	if (err)
		return err;
	err = rs_announce_map(rs, RS_FRAME_IOMAP, map);
	if (err) {
		pthread_mutex_lock(&rs->rx_lock);
		rs_unlink_local_map(rs, map);
		pthread_mutex_unlock(&rs->rx_lock);
	}
	return err;
}

off_t riomap(int socket, void *buf, size_t len, int prot, int flags, off_t offset)
{
	struct rsock *rs = rs_get(socket);
	struct rs_local_map *map = NULL;
	uint64_t mapped_at = 0;
	int err = 0;

	(void)flags;	/* rsockets define none */
	if (!rs)
		return rs_fail(EBADF);
	if (rs->type != SOCK_STREAM || !buf || !len || (prot & ~PROT_WRITE) || offset < -1)
		err = EINVAL;
	else if (rs_update_state(rs) != RS_STATE_CONNECTED)
		err = ENOTCONN;
	else if (!(map = calloc(1, sizeof(*map))))
		err = ENOMEM;
	if (err)
		goto out;
	map->buf = buf;
	map->len = len;
	map->offset = offset == -1 ? (uintptr_t)buf : (uint64_t)offset;
	map->remote_writable = prot & PROT_WRITE;
	mapped_at = map->offset;
	if (mapped_at > INT64_MAX || len > INT64_MAX - mapped_at) {
		err = EINVAL;	/* riowrite() takes an off_t: the peer could not reach it all */
		goto out;
	}
	if (map->remote_writable) {
		err = rs_add_writable_map(rs, map);
	} else {
		/* Local only: nothing to place, but riounmap() must find it. */
		pthread_mutex_lock(&rs->rx_lock);
		map->next = rs->local_maps;
		rs->local_maps = map;
		pthread_mutex_unlock(&rs->rx_lock);
	}
out:
	rs_put(rs);
	if (err) {
		free(map);
		return rs_fail(err);
	}
	return mapped_at;
}

int riounmap(int socket, void *buf, size_t len)
{
	struct rsock *rs = rs_get(socket);
	struct rs_local_map *map;

	if (!rs)
		return rs_fail(EBADF);
	pthread_mutex_lock(&rs->rx_lock);
	for (map = rs->local_maps; map; map = map->next)
		if (map->buf == buf && map->len == len)
			break;
	/* After this no IOWRITE byte lands in buf: placement happens under rx_lock. */
	if (map)
		rs_unlink_local_map(rs, map);
	pthread_mutex_unlock(&rs->rx_lock);
	if (!map) {
		rs_put(rs);
		return rs_fail(EINVAL);
	}
	/* A connection too broken to carry the notice will carry no more writes either. */
	if (map->remote_writable)
		rs_announce_map(rs, RS_FRAME_IOUNMAP, map);
	free(map);
	rs_put(rs);
	return 0;
}

/* The peer's mapping holding offset, as [start, end); false if there is none. */
static bool rs_find_remote_map(struct rsock *rs, uint64_t offset, uint64_t *end)
{
	bool found = false;

	pthread_mutex_lock(&rs->rx_lock);
	/* Take in the IOMAP frames that arrived ahead of any unread stream data. */
	rs_rx_pump(rs);
	for (struct rs_remote_map *map = rs->remote_maps; map; map = map->next) {
		if (offset >= map->offset && offset - map->offset < map->len) {
			*end = map->offset + map->len;
			found = true;
			break;
		}
	}
	pthread_mutex_unlock(&rs->rx_lock);
	return found;
}

size_t riowrite(int socket, const void *buf, size_t count, off_t offset, int flags)
{
	struct rsock *rs = rs_get(socket);
	const uint8_t *src = buf;
	size_t done = 0;
	int err = 0;

	if (!rs)
		return rs_fail(EBADF);
	if (rs->type != SOCK_STREAM || offset < 0 || (count && !buf))
		err = EINVAL;
	else
		err = rs_wait_connected(rs, rs_nonblocking(rs, flags));
	while (!err && done < count) {
		uint64_t target = (uint64_t)offset + done;
		struct iovec iov = { .iov_base = (void *)(src + done) };
		uint64_t end;
		ssize_t sent;

		/* Writes stop at the end of a mapping, or where nothing is mapped. */
		if (!rs_find_remote_map(rs, target, &end)) {
			err = EINVAL;
			break;
		}
		iov.iov_len = rs_min(count - done, end - target);
		sent = rs_send_frames(rs, RS_FRAME_IOWRITE, target, &iov, 1, iov.iov_len, flags);
		if (sent < 0) {
			err = errno;
			break;
		}
		done += sent;
		if ((size_t)sent < iov.iov_len)
			break;
	}
	rs_put(rs);
	if (done)
		return done;
	return err ? rs_fail(err) : 0;
}
