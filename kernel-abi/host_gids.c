// SPDX-License-Identifier: MIT
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "host_gids.h"

static int collect_family(struct ifaddrs *list, int family, struct host_gid *gids, int n, int max)
{
	for (struct ifaddrs *ifa = list; ifa && n < max; ifa = ifa->ifa_next) {
		struct host_gid *g = &gids[n];

		if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != family)
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
		snprintf(g->ifname, sizeof(g->ifname), "%s", ifa->ifa_name);
		n++;
	}
	return n;
}

int host_gids_collect(struct host_gid *gids, int max)
{
	struct ifaddrs *list;
	int n;

	if (getifaddrs(&list))
		return -errno;
	n = collect_family(list, AF_INET, gids, 0, max);
	n = collect_family(list, AF_INET6, gids, n, max);
	freeifaddrs(list);
	return n;
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
