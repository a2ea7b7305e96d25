// SPDX-License-Identifier: MIT
/*
 * CM ids: creation and teardown, binding and resolving addresses, listening, options, and
 * the devices ids attach to. An id's TCP port is its rdma_cm port: port P of the RDMA port
 * space is TCP port P of the same address (docs/rdma-cm.md).
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

static pthread_mutex_t devices_lock = PTHREAD_MUTEX_INITIALIZER;
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

EXPORT int rdma_destroy_id(struct rdma_cm_id *id)
{
	struct cm_id *cid = to_cm_id(id);

	if (!cid) {
		errno = EINVAL;
		return -1;
	}
	cm_thread_unwatch(cid);
	if (cid->state == CM_ESTABLISHED && cid->sock >= 0) {
		struct cm_msg dreq = { .magic = htonl(CM_WIRE_MAGIC),
				       .version = htons(CM_WIRE_VERSION), .type = CM_MSG_DREQ };

		cm_send_msg(cid->sock, &dreq);	/* the peer sees DISCONNECTED */
	}
	if (cid->sock >= 0)
		close(cid->sock);
	cid->sock = -1;
	if (id->event) {
		rdma_ack_cm_event(id->event);
		id->event = NULL;
	}
	/* Events still queued for it go; delivered ones must be acked first, as in librdmacm. */
	cm_channel_drop_events_of(to_cm_channel(id->channel), cid);
	pthread_mutex_lock(&cid->lock);
	while (cid->events_outstanding)
		pthread_cond_wait(&cid->cond, &cid->lock);
	pthread_mutex_unlock(&cid->lock);
	cm_id_free(cid);
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

EXPORT int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct cm_id *cid = to_cm_id(id);
	union ibv_gid gid;
	int ret;

	if (!cid || !addr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) ||
	    cid->state != CM_IDLE) {
		errno = EINVAL;
		return -1;
	}
	if (!is_any(addr)) {
		/* A specific address binds the id to the device that owns it. */
		id->verbs = cm_softrdma_context();
		if (cm_gid_index_of(id->verbs, addr, &gid) < 0) {
			id->verbs = NULL;
			errno = EADDRNOTAVAIL;
			return -1;
		}
		id->route.addr.addr.ibaddr.sgid = gid;
		id->port_num = 1;
	}
	ret = bind_socket(cid, addr);
	if (ret) {
		id->verbs = NULL;
		errno = ret;
		return -1;
	}
	cid->state = CM_ADDR_BOUND;
	return 0;
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

EXPORT int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr,
			     struct sockaddr *dst_addr, int timeout_ms)
{
	struct cm_id *cid = to_cm_id(id);
	struct sockaddr_storage src;
	union ibv_gid sgid;
	int ret = 0;

	(void)timeout_ms;	/* resolution is local and immediate */
	if (!cid || !dst_addr || (dst_addr->sa_family != AF_INET &&
				  dst_addr->sa_family != AF_INET6)) {
		errno = EINVAL;
		return -1;
	}
	if (src_addr && cid->state == CM_IDLE && rdma_bind_addr(id, src_addr))
		return -1;
	if (cid->state != CM_IDLE && cid->state != CM_ADDR_BOUND) {
		errno = EINVAL;
		return -1;
	}
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
	if (cid->sync) {
		ret = cm_wait_event(cid, RDMA_CM_EVENT_ADDR_RESOLVED);
		if (ret) {
			errno = ret;
			return -1;
		}
	}
	return 0;
}

EXPORT int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	struct cm_id *cid = to_cm_id(id);
	int ret;

	(void)timeout_ms;
	if (!cid || cid->state != CM_ADDR_RESOLVED) {
		errno = EINVAL;
		return -1;
	}
	cid->state = CM_ROUTE_RESOLVED;
	cm_post_event(cid, RDMA_CM_EVENT_ROUTE_RESOLVED, 0, NULL, NULL);
	if (cid->sync) {
		ret = cm_wait_event(cid, RDMA_CM_EVENT_ROUTE_RESOLVED);
		if (ret) {
			errno = ret;
			return -1;
		}
	}
	return 0;
}

EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	struct cm_id *cid = to_cm_id(id);
	struct sockaddr_in6 any = { .sin6_family = AF_INET6 };
	int ret;

	if (!cid || (cid->state != CM_IDLE && cid->state != CM_ADDR_BOUND)) {
		errno = EINVAL;
		return -1;
	}
	if (cid->state == CM_IDLE && rdma_bind_addr(id, (struct sockaddr *)&any))
		return -1;
	if (listen(cid->sock, backlog > 0 ? backlog : 128)) {
		return -1;
	}
	fcntl(cid->sock, F_SETFL, fcntl(cid->sock, F_GETFL) | O_NONBLOCK);
	cid->state = CM_LISTENING;
	ret = cm_thread_watch(cid);
	if (ret) {
		errno = ret;
		return -1;
	}
	return 0;
}

EXPORT int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval,
			   size_t optlen)
{
	struct cm_id *cid = to_cm_id(id);

	if (!cid || !optval) {
		errno = EINVAL;
		return -1;
	}
	if (level == RDMA_OPTION_ID) {
		switch (optname) {
		case RDMA_OPTION_ID_TOS:
			if (optlen != sizeof(uint8_t))
				break;
			cid->tos = *(uint8_t *)optval;
			return 0;
		case RDMA_OPTION_ID_REUSEADDR:
			if (optlen != sizeof(int))
				break;
			cid->reuseaddr = *(int *)optval;
			return 0;
		case RDMA_OPTION_ID_AFONLY:
			if (optlen != sizeof(int))
				break;
			cid->afonly = *(int *)optval ? 1 : 0;
			return 0;
		case RDMA_OPTION_ID_ACK_TIMEOUT:
			if (optlen != sizeof(uint8_t))
				break;
			cid->ack_timeout = *(uint8_t *)optval;
			return 0;
		default:
			errno = ENOSYS;
			return -1;
		}
		errno = EINVAL;
		return -1;
	}
	/* Path records are an IB fabric's business; the soft device has no subnet manager. */
	errno = ENOSYS;
	return -1;
}

EXPORT int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
	struct cm_id *cid = to_cm_id(id);

	if (!cid || !channel) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cid->lock);
	while (cid->events_outstanding)
		pthread_cond_wait(&cid->cond, &cid->lock);
	id->channel = channel;
	pthread_mutex_unlock(&cid->lock);
	if (cid->own_channel) {
		rdma_destroy_event_channel(&cid->own_channel->channel);
		cid->own_channel = NULL;
		cid->sync = false;
	}
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

EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
	(void)id, (void)addr, (void)context;
	errno = EOPNOTSUPP;	/* UD multicast is not built */
	return -1;
}

EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex *attr,
				  void *context)
{
	(void)id, (void)attr, (void)context;
	errno = EOPNOTSUPP;
	return -1;
}

EXPORT int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	(void)id, (void)addr;
	errno = EOPNOTSUPP;
	return -1;
}
