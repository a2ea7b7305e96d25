/* SPDX-License-Identifier: MIT */
/*
 * The soft device's GID table: one RoCE v2 GID per IP address of the host (IPv4 as
 * ::ffff:a.b.c.d), IPv4 before IPv6, interfaces in the kernel's order, so loopback comes
 * first and GID 0 is ::ffff:127.0.0.1 on an ordinary host. The sysfs tree and the provider
 * both read the table from here, so what ibv_query_gid shows is what the engine can reach.
 */
#ifndef SOFTRDMA_HOST_GIDS_H
#define SOFTRDMA_HOST_GIDS_H

#include <net/if.h>
#include <stdint.h>

struct host_gid {
	uint8_t raw[16];
	char ifname[IF_NAMESIZE];
};

/* Fills up to max entries; returns how many, or -errno. */
int host_gids_collect(struct host_gid *gids, int max);

/* "xxxx:xxxx:xxxx:xxxx:xxxx:xxxx:xxxx:xxxx": the only form libibverbs parses from sysfs. */
void host_gid_format(const uint8_t raw[16], char out[40]);

/* A node GUID that stays the same across runs on one host (from /etc/machine-id). */
uint64_t host_node_guid(void);

#endif
