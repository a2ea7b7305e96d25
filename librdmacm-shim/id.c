// SPDX-License-Identifier: MIT
/*
 * CM ids: creation and teardown, binding and resolving addresses, listening, options, and
 * the devices ids attach to. An id's TCP port is its rdma_cm port: port P of the RDMA port
 * space is TCP port P of the same address (docs/rdma-cm.md). Locks: cm.h's rule; the calls
 * here take the id's lock themselves. devices_lock guards the device table alone.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cm.h"

static pthread_mutex_t devices_lock = PTHREAD_MUTEX_INITIALIZER;	/* contexts, ncontexts */
static struct ibv_context **contexts;	/* every device, opened once, NULL-terminated */
static int ncontexts;

static int open_devices(void)
{
	struct ibv_device **list;
	int n;

	if (contexts)
		return 0;
	list = ibv_get_device_list(&n);
	if (!list)
		return errno ? errno : ENODEV;
	contexts = calloc((size_t)n + 1, sizeof(*contexts));
	if (!contexts) {
		ibv_free_device_list(list);
		return ENOMEM;
	}
	for (int i = 0; i < n; i++) {
		struct ibv_context *ctx = ibv_open_device(list[i]);

		if (ctx)
			contexts[ncontexts++] = ctx;
	}
	ibv_free_device_list(list);
	return 0;
}

EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct ibv_context **copy = NULL;

	pthread_mutex_lock(&devices_lock);
	if (!open_devices()) {
		copy = calloc((size_t)ncontexts + 1, sizeof(*copy));
		if (copy)
			memcpy(copy, contexts, (size_t)ncontexts * sizeof(*copy));
	}
	if (num_devices)
		*num_devices = copy ? ncontexts : 0;
	pthread_mutex_unlock(&devices_lock);
	return copy;
}

EXPORT void rdma_free_devices(struct ibv_context **list)
{
	free(list);	/* the contexts stay open for the ids, as in the real library */
}

/* The soft device's context: rdma_cm here only connects softrdma QPs. */
struct ibv_context *cm_softrdma_context(void)
{
	struct ibv_context *found = NULL;

	pthread_mutex_lock(&devices_lock);
	if (!open_devices())
		for (int i = 0; i < ncontexts && !found; i++)
			if (!strncmp(ibv_get_device_name(contexts[i]->device), "softrdma", 8))
				found = contexts[i];
	pthread_mutex_unlock(&devices_lock);
	return found;
}

void cm_sockaddr_to_gid(const struct sockaddr *sa, union ibv_gid *gid)
{
	memset(gid, 0, sizeof(*gid));
	if (sa->sa_family == AF_INET) {
		gid->raw[10] = 0xff;
		gid->raw[11] = 0xff;
		memcpy(&gid->raw[12], &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		memcpy(gid->raw, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
	}
}

void cm_gid_to_sockaddr(const union ibv_gid *gid, uint16_t port, struct sockaddr_storage *ss)
{
	static const uint8_t v4_prefix[12] = { [10] = 0xff, [11] = 0xff };

	memset(ss, 0, sizeof(*ss));
	if (!memcmp(gid->raw, v4_prefix, 12)) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		memcpy(&sin->sin_addr, &gid->raw[12], 4);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		memcpy(&sin6->sin6_addr, gid->raw, 16);
	}
}

int cm_gid_index_of(struct ibv_context *verbs, const struct sockaddr *addr, union ibv_gid *gid)
{
	struct ibv_port_attr port;
	union ibv_gid entry;

	cm_sockaddr_to_gid(addr, gid);
	if (!verbs || ibv_query_port(verbs, 1, &port))
		return -1;
	for (int i = 0; i < port.gid_tbl_len; i++)
		if (!ibv_query_gid(verbs, 1, i, &entry) && !memcmp(&entry, gid, sizeof(entry)))
			return i;
	return -1;
}

struct cm_id *cm_id_new(struct rdma_event_channel *channel, void *context,
			enum rdma_port_space ps, enum ibv_qp_type qp_type)
{
	struct cm_id *id = calloc(1, sizeof(*id));

	if (!id)
		return NULL;
	if (!channel) {
		/* No channel: a synchronous id, whose calls wait for their own events. */
		channel = rdma_create_event_channel();
		if (!channel) {
			free(id);
			return NULL;
		}
		id->sync = true;
		id->own_channel = to_cm_channel(channel);
	}
	pthread_mutex_init(&id->lock, NULL);
	pthread_cond_init(&id->cond, NULL);
	id->id.channel = channel;
	id->id.context = context;
	id->id.ps = ps;
	id->id.qp_type = qp_type;
	id->sock = -1;
	id->watch_slot = -1;
	id->afonly = -1;
	id->ack_timeout = 14;
	return id;
}

void cm_id_free(struct cm_id *id)
{
	cm_mcast_forget(id);
	if (id->own_channel)
		rdma_destroy_event_channel(&id->own_channel->channel);
	pthread_cond_destroy(&id->cond);
	pthread_mutex_destroy(&id->lock);
	free(id);
}

static enum ibv_qp_type qp_type_of(enum rdma_port_space ps)
{
	return ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB ? IBV_QPT_UD : IBV_QPT_RC;
}

EXPORT int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id,
			  void *context, enum rdma_port_space ps)
{
	struct cm_id *cid;

	if (!id || (ps != RDMA_PS_TCP && ps != RDMA_PS_UDP && ps != RDMA_PS_IB &&
		    ps != RDMA_PS_IPOIB)) {
		errno = EINVAL;
		return -1;
	}
	cid = cm_id_new(channel, context, ps, qp_type_of(ps));
	if (!cid)
		return -1;
	*id = &cid->id;
	return 0;
}

/*
 * Takes an id down: no callback runs for it once it is unwatched; its peer hears DREQ or
 * REJ as its state asks; its queued events go, and for a listener the connection requests
 * nobody took, with their ids. Then it waits until the application acknowledged every
 * event it was handed, as librdmacm does.
 */
static void destroy(struct cm_id *cid)
{
	struct cm_event *requests, *next;
	struct rdma_event_channel *ch;
	enum cm_state was;

	pthread_mutex_lock(&cid->lock);
	cm_release_kept_event(cid);
	was = cid->state;
	cid->state = CM_DESTROYING;
	ch = cid->id.channel;
	pthread_mutex_unlock(&cid->lock);
	cm_thread_unwatch(cid);
	cm_conn_close(cid, was);
	cm_channel_take_events_of(to_cm_channel(ch), cid, &requests);
	for (; requests; requests = next) {
		struct cm_id *child = requests->owner;

		next = requests->next;
		free(requests);
		pthread_mutex_lock(&child->lock);
		child->events_dropped++;
		pthread_mutex_unlock(&child->lock);
		destroy(child);	/* REJ: its requester learns nobody took it */
	}
	pthread_mutex_lock(&cid->lock);
	cm_wait_events_done(cid);
	pthread_mutex_unlock(&cid->lock);
	cm_id_free(cid);
}

EXPORT int rdma_destroy_id(struct rdma_cm_id *id)
{
	if (!id) {
		errno = EINVAL;
		return -1;
	}
	destroy(to_cm_id(id));
	return 0;
}

static int bind_socket(struct cm_id *id, const struct sockaddr *addr)
{
	socklen_t len = addr->sa_family == AF_INET ? sizeof(struct sockaddr_in) :
						     sizeof(struct sockaddr_in6);
	int one = 1, fd;

	fd = socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return errno;
	/*
	 * Connections accepted on a port keep it busy for TCP, not for rdma_cm: a new
	 * listener on the port of one just destroyed must work (perftest -R does that).
	 * Two listeners on one port are still refused.
	 */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (addr->sa_family == AF_INET6 && id->afonly >= 0)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &id->afonly, sizeof(id->afonly));
	if (bind(fd, addr, len)) {
		int err = errno;

		close(fd);
		return err;
	}
	len = sizeof(id->id.route.addr.src_storage);
	getsockname(fd, &id->id.route.addr.src_addr, &len);
	id->sock = fd;
	return 0;
}

static bool is_any(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_addr.s_addr == htonl(INADDR_ANY);
	return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)sa)->sin6_addr);
}

/* id->lock held. */
static int bind_locked(struct cm_id *cid, const struct sockaddr *addr)
{
	struct rdma_cm_id *id = &cid->id;
	union ibv_gid gid;
	int ret;

	if (!addr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) ||
	    cid->state != CM_IDLE)
		return EINVAL;
	if (!is_any(addr)) {
		/* A specific address binds the id to the device that owns it. */
		id->verbs = cm_softrdma_context();
		if (cm_gid_index_of(id->verbs, addr, &gid) < 0) {
			id->verbs = NULL;
			return EADDRNOTAVAIL;
		}
		id->route.addr.addr.ibaddr.sgid = gid;
		id->port_num = 1;
	}
	ret = bind_socket(cid, addr);
	if (ret) {
		id->verbs = NULL;
		return ret;
	}
	cid->state = CM_ADDR_BOUND;
	return 0;
}

static int fail(int err)
{
	errno = err;
	return -1;
}

EXPORT int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct cm_id *cid = to_cm_id(id);
	int ret;

	if (!cid)
		return fail(EINVAL);
	pthread_mutex_lock(&cid->lock);
	ret = bind_locked(cid, addr);
	pthread_mutex_unlock(&cid->lock);
	return ret ? fail(ret) : 0;
}

/* The source address the host would use to reach dst. */
static int route_source(const struct sockaddr *dst, struct sockaddr_storage *src)
{
	socklen_t len = dst->sa_family == AF_INET ? sizeof(struct sockaddr_in) :
						    sizeof(struct sockaddr_in6);
	int fd = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int ret = 0;

	if (fd < 0)
		return errno;
	if (connect(fd, dst, len))
		ret = errno;
	len = sizeof(*src);
	if (!ret && getsockname(fd, (struct sockaddr *)src, &len))
		ret = errno;
	close(fd);
	return ret;
}

static socklen_t sockaddr_len(const struct sockaddr *sa)
{
	return sa->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
}

/* id->lock held: resolution is local and immediate; 0, or why it failed (posted). */
static int resolve_addr_locked(struct cm_id *cid, struct sockaddr *src_addr,
			       struct sockaddr *dst_addr)
{
	struct rdma_cm_id *id = &cid->id;
	struct sockaddr_storage src;
	union ibv_gid sgid;
	int ret = 0;

	if (src_addr && cid->state == CM_IDLE && (ret = bind_locked(cid, src_addr)))
		return ret;
	if (cid->state != CM_IDLE && cid->state != CM_ADDR_BOUND)
		return EINVAL;
	if (cid->state == CM_ADDR_BOUND && !is_any(&id->route.addr.src_addr)) {
		memcpy(&src, &id->route.addr.src_storage, sizeof(src));
	} else {
		ret = route_source(dst_addr, &src);
		if (!ret)
			((struct sockaddr_in *)&src)->sin_port =
				((struct sockaddr_in *)&id->route.addr.src_storage)->sin_port;
	}
	memcpy(&id->route.addr.dst_storage, dst_addr, sockaddr_len(dst_addr));
	if (!ret) {
		id->verbs = cm_softrdma_context();
		if (cm_gid_index_of(id->verbs, (struct sockaddr *)&src, &sgid) < 0)
			ret = EADDRNOTAVAIL;	/* the route leaves through no soft-device address */
	}
	if (!ret) {
		memcpy(&id->route.addr.src_storage, &src, sizeof(src));
		id->route.addr.addr.ibaddr.sgid = sgid;
		cm_sockaddr_to_gid(dst_addr, &id->route.addr.addr.ibaddr.dgid);
		id->route.addr.addr.ibaddr.pkey = htons(0xffff);
		id->port_num = 1;
		cid->state = CM_ADDR_RESOLVED;
	}
	cm_post_event(cid, ret ? RDMA_CM_EVENT_ADDR_ERROR : RDMA_CM_EVENT_ADDR_RESOLVED,
		      -ret, NULL, NULL);
	return 0;
}

/* As connect.c's finish_sync: sync was read under the lock. */
static int wait_sync(struct cm_id *cid, bool sync, enum rdma_cm_event_type expected)
{
	int ret = sync ? cm_wait_event(cid, expected) : 0;

	return ret ? fail(ret) : 0;
}

EXPORT int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr,
			     struct sockaddr *dst_addr, int timeout_ms)
{
	struct cm_id *cid = to_cm_id(id);
	bool sync;
	int ret;

	(void)timeout_ms;
	if (!cid || !dst_addr || (dst_addr->sa_family != AF_INET &&
				  dst_addr->sa_family != AF_INET6))
		return fail(EINVAL);
	pthread_mutex_lock(&cid->lock);
	ret = resolve_addr_locked(cid, src_addr, dst_addr);
	sync = cid->sync;
	pthread_mutex_unlock(&cid->lock);
	return ret ? fail(ret) : wait_sync(cid, sync, RDMA_CM_EVENT_ADDR_RESOLVED);
}

EXPORT int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	struct cm_id *cid = to_cm_id(id);
	bool sync;
	int ret = 0;

	(void)timeout_ms;
	if (!cid)
		return fail(EINVAL);
	pthread_mutex_lock(&cid->lock);
	if (cid->state == CM_ADDR_RESOLVED) {
		cid->state = CM_ROUTE_RESOLVED;
		cm_post_event(cid, RDMA_CM_EVENT_ROUTE_RESOLVED, 0, NULL, NULL);
	} else {
		ret = EINVAL;
	}
	sync = cid->sync;
	pthread_mutex_unlock(&cid->lock);
	return ret ? fail(ret) : wait_sync(cid, sync, RDMA_CM_EVENT_ROUTE_RESOLVED);
}

/* id->lock held. */
static int listen_locked(struct cm_id *cid, int backlog)
{
	struct sockaddr_in6 any = { .sin6_family = AF_INET6 };
	int ret;

	if (cid->state != CM_IDLE && cid->state != CM_ADDR_BOUND)
		return EINVAL;
	if (cid->state == CM_IDLE && (ret = bind_locked(cid, (struct sockaddr *)&any)))
		return ret;
	if (listen(cid->sock, backlog > 0 ? backlog : 128))
		return errno;
	fcntl(cid->sock, F_SETFL, fcntl(cid->sock, F_GETFL) | O_NONBLOCK);
	cid->state = CM_LISTENING;
	ret = cm_thread_watch(cid);
	if (ret)
		cid->state = CM_ADDR_BOUND;
	return ret;
}

EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	struct cm_id *cid = to_cm_id(id);
	int ret;

	if (!cid)
		return fail(EINVAL);
	pthread_mutex_lock(&cid->lock);
	ret = listen_locked(cid, backlog);
	pthread_mutex_unlock(&cid->lock);
	return ret ? fail(ret) : 0;
}

/* id->lock held: 0, or errno. */
static int set_id_option(struct cm_id *cid, int optname, void *optval, size_t optlen)
{
	switch (optname) {
	case RDMA_OPTION_ID_TOS:
		if (optlen != sizeof(uint8_t))
			return EINVAL;
		cid->tos = *(uint8_t *)optval;
		return 0;
	case RDMA_OPTION_ID_REUSEADDR:
		if (optlen != sizeof(int))
			return EINVAL;
		cid->reuseaddr = *(int *)optval;
		return 0;
	case RDMA_OPTION_ID_AFONLY:
		if (optlen != sizeof(int))
			return EINVAL;
		cid->afonly = *(int *)optval ? 1 : 0;
		return 0;
	case RDMA_OPTION_ID_ACK_TIMEOUT:
		if (optlen != sizeof(uint8_t))
			return EINVAL;
		cid->ack_timeout = *(uint8_t *)optval;
		return 0;
	default:
		return ENOSYS;
	}
}

EXPORT int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval,
			   size_t optlen)
{
	struct cm_id *cid = to_cm_id(id);
	int ret;

	if (!cid || !optval)
		return fail(EINVAL);
	/* Path records are an IB fabric's business; the soft device has no subnet manager. */
	if (level != RDMA_OPTION_ID)
		return fail(ENOSYS);
	pthread_mutex_lock(&cid->lock);
	ret = set_id_option(cid, optname, optval, optlen);
	pthread_mutex_unlock(&cid->lock);
	return ret ? fail(ret) : 0;
}

/*
 * As librdmacm: the id's queued events move with it; a synchronous id's own channel goes
 * (its kept event acknowledged); no channel makes the id synchronous. Returns once every
 * event handed out on the old channel is acknowledged.
 */
EXPORT int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
	struct cm_id *cid = to_cm_id(id);
	struct cm_channel *own = NULL;
	struct rdma_event_channel *old;

	if (!cid)
		return fail(EINVAL);
	if (!channel) {
		channel = rdma_create_event_channel();
		if (!channel)
			return -1;
		own = to_cm_channel(channel);
	}
	pthread_mutex_lock(&cid->lock);
	if (cid->sync && own) {
		pthread_mutex_unlock(&cid->lock);
		rdma_destroy_event_channel(channel);
		return fail(EINVAL);
	}
	cm_release_kept_event(cid);
	old = id->channel;
	if (old != channel)
		cm_channel_move_events(to_cm_channel(old), to_cm_channel(channel), cid);
	id->channel = channel;
	if (cid->own_channel && &cid->own_channel->channel != channel)
		rdma_destroy_event_channel(&cid->own_channel->channel);
	cid->own_channel = own;
	cid->sync = own != NULL;
	cm_wait_acked(cid, atomic_load(&cid->events_reported));
	pthread_mutex_unlock(&cid->lock);
	return 0;
}

static uint16_t port_of(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_port;
	if (sa->sa_family == AF_INET6)
		return ((const struct sockaddr_in6 *)sa)->sin6_port;
	return 0;
}

EXPORT __be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return port_of(&id->route.addr.src_addr);
}

EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return port_of(&id->route.addr.dst_addr);
}
