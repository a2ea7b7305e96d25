// SPDX-License-Identifier: MIT
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host_gids.h"

/* Calls fn(name) for each name of a comma-separated list; stops at the first non-zero. */
static int for_each_netdev(const char *list, int (*fn)(const char *name, void *arg), void *arg,
			   char bad[IF_NAMESIZE + 16])
{
	const char *p = list;

	while (p && *p) {
		size_t len = strcspn(p, ",");
		char name[IF_NAMESIZE];
		int ret;

		if (len == 0 || len >= IF_NAMESIZE) {
			if (bad)
				snprintf(bad, IF_NAMESIZE + 16, "%s", len ? "an over-long name" : "an empty name");
			return -EINVAL;
		}
		memcpy(name, p, len);
		name[len] = 0;
		ret = fn(name, arg);
		if (ret) {
			if (bad)
				snprintf(bad, IF_NAMESIZE + 16, "%s", name);
			return ret;
		}
		p += len;
		if (*p == ',' && !*++p) {
			if (bad)
				snprintf(bad, IF_NAMESIZE + 16, "an empty name");
			return -EINVAL;
		}
	}
	return 0;
}

static int netdev_exists(const char *name, void *arg)
{
	(void)arg;
	return if_nametoindex(name) ? 0 : -ENODEV;
}

int host_netdevs_check(const char *list, char missing[IF_NAMESIZE + 16])
{
	return for_each_netdev(list, netdev_exists, NULL, missing);
}

static int name_is(const char *name, void *arg)
{
	return !strcmp(name, arg);
}

/* Loopback, or one of the netdevs listed; "eth0:1" (an IPv4 label) belongs to eth0. */
static bool attached(const struct ifaddrs *ifa, const char *netdevs)
{
	char name[IF_NAMESIZE];

	if (ifa->ifa_flags & IFF_LOOPBACK)
		return true;
	snprintf(name, sizeof(name), "%.*s", (int)strcspn(ifa->ifa_name, ":"), ifa->ifa_name);
	return for_each_netdev(netdevs, name_is, name, NULL) == 1;
}

static int collect_family(struct ifaddrs *list, const char *netdevs, int family,
			  struct host_gid *gids, int n, int max)
{
	for (struct ifaddrs *ifa = list; ifa && n < max; ifa = ifa->ifa_next) {
		struct host_gid *g = &gids[n];

		if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != family || !attached(ifa, netdevs))
			continue;
		memset(g, 0, sizeof(*g));
		if (family == AF_INET) {
			const struct sockaddr_in *sin = (const void *)ifa->ifa_addr;

			g->raw[10] = 0xff;
			g->raw[11] = 0xff;
			memcpy(&g->raw[12], &sin->sin_addr, 4);
		} else {
			const struct sockaddr_in6 *sin6 = (const void *)ifa->ifa_addr;

			memcpy(g->raw, &sin6->sin6_addr, 16);
		}
		snprintf(g->ifname, sizeof(g->ifname), "%.*s", (int)strcspn(ifa->ifa_name, ":"),
			 ifa->ifa_name);
		g->ifindex = if_nametoindex(g->ifname);
		n++;
	}
	return n;
}

int host_gids_collect_for(const char *netdevs, struct host_gid *gids, int max)
{
	struct ifaddrs *list;
	int n = host_netdevs_check(netdevs, NULL);

	if (n)
		return n;
	if (getifaddrs(&list))
		return -errno;
	n = collect_family(list, netdevs, AF_INET, gids, 0, max);
	n = collect_family(list, netdevs, AF_INET6, gids, n, max);
	freeifaddrs(list);
	return n;
}

int host_gids_collect(struct host_gid *gids, int max)
{
	return host_gids_collect_for(getenv(HOST_NETDEVS_ENV), gids, max);
}

void host_gid_format(const uint8_t raw[16], char out[40])
{
	for (int i = 0; i < 8; i++)
		sprintf(out + i * 5, "%02x%02x%s", raw[2 * i], raw[2 * i + 1], i < 7 ? ":" : "");
}

uint64_t host_node_guid(void)
{
	/* FNV-1a: any stable hash will do, the id only has to differ between hosts. */
	uint64_t h = 0xcbf29ce484222325ull;
	char id[256] = "";
	FILE *f = fopen("/etc/machine-id", "re");

	if (!f || !fgets(id, sizeof(id), f))
		gethostname(id, sizeof(id) - 1);
	if (f)
		fclose(f);
	for (const char *p = id; *p && *p != '\n'; p++)
		h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
	/* Locally administered, as an EUI-64 made up in software must be. */
	h &= ~(0xffull << 56);
	h |= 0x02ull << 56;
	return h;
}
