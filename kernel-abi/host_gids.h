/* SPDX-License-Identifier: MIT */
/*
 * The soft device's GID table, and the network interfaces it covers.
 *
 * Like rxe, which is attached to the netdev it was added on (`rdma link add rxe0 type rxe
 * netdev eth0`), softrdma0 is attached to a set of interfaces: every loopback interface,
 * always, and the interfaces named in $SOFTRDMA_NETDEVS (comma-separated; `softrdma run
 * --netdev` and `softrdma env --netdev` set and export it). By default, then, nothing of
 * the device is reachable from any other host.
 *
 * The table has one RoCE v2 GID per IP address of those interfaces (IPv4 as
 * ::ffff:a.b.c.d), IPv4 before IPv6, interfaces in the kernel's order, so loopback comes
 * first and GID 0 is ::ffff:127.0.0.1 on an ordinary host. The sysfs tree (and through it
 * the provider's ibv_query_gid) and the engine's listeners all take it from here: an
 * engine listens on exactly the addresses host_gids_collect() returns (IPv6 link-local
 * ones with ifindex as their scope), so what ibv_query_gid shows is what the device can
 * reach and be reached on, and nothing else. The table is what the interfaces have when
 * it is collected; an address added later is not in it (as for a run's sysfs tree).
 */
#ifndef SOFTRDMA_HOST_GIDS_H
#define SOFTRDMA_HOST_GIDS_H

#include <net/if.h>
#include <stdint.h>

#define HOST_NETDEVS_ENV "SOFTRDMA_NETDEVS"

struct host_gid {
	uint8_t raw[16];
	char ifname[IF_NAMESIZE];
	unsigned int ifindex;
};

/*
 * Checks a netdev list ("eth0,veth1"): 0 when every name is an interface of this host (of
 * this network namespace); -ENODEV with the first missing name in missing; -EINVAL for a
 * malformed list (an empty or over-long name), missing then holding what was wrong.
 */
int host_netdevs_check(const char *list, char missing[IF_NAMESIZE + 16]);

/*
 * The GID table of the interfaces the device is attached to ($SOFTRDMA_NETDEVS and
 * loopback). Fills up to max entries; returns how many, or -errno: -ENODEV or -EINVAL when
 * $SOFTRDMA_NETDEVS does not pass host_netdevs_check().
 */
int host_gids_collect(struct host_gid *gids, int max);

/* The same for an explicit list of netdevs besides loopback (NULL or "": loopback only). */
int host_gids_collect_for(const char *netdevs, struct host_gid *gids, int max);

/* "xxxx:xxxx:xxxx:xxxx:xxxx:xxxx:xxxx:xxxx": the only form libibverbs parses from sysfs. */
void host_gid_format(const uint8_t raw[16], char out[40]);

/* A node GUID that stays the same across runs on one host (from /etc/machine-id). */
uint64_t host_node_guid(void);

#endif
