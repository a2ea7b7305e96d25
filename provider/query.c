// SPDX-License-Identifier: MIT
/* query_device_ex and query_port: the numbers come from emu/limits.h and nowhere else. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "softrdma.h"
#include "emu/limits.h"

static int count_gids(const char *dir_path)
{
	struct dirent *d;
	int n = 0;
	DIR *dir = opendir(dir_path);

	if (!dir)
		return 0;
	while ((d = readdir(dir)))
		if (d->d_name[0] != '.')
			n++;
	closedir(dir);
	return n;
}

/* One sysfs GID file: eight groups of four hex digits, as the kernel writes them. */
static void read_gid(const char *dir_path, int index, union ibv_gid *gid)
{
	char path[IBV_SYSFS_PATH_MAX + 48], text[64];
	FILE *f;

	memset(gid, 0, sizeof(*gid));
	snprintf(path, sizeof(path), "%s/%d", dir_path, index);
	f = fopen(path, "re");
	if (!f)
		return;
	if (fgets(text, sizeof(text), f)) {
		text[strcspn(text, "\n")] = 0;
		if (inet_pton(AF_INET6, text, gid->raw) != 1)
			memset(gid, 0, sizeof(*gid));
	}
	fclose(f);
}

void sr_load_gids(struct sr_context *ctx, const struct ibv_device *device)
{
	char dir_path[IBV_SYSFS_PATH_MAX + 32];

	snprintf(dir_path, sizeof(dir_path), "%s/ports/1/gids", device->ibdev_path);
	ctx->gid_count = count_gids(dir_path);
	if (ctx->gid_count > EMU_MAX_GIDS)
		ctx->gid_count = EMU_MAX_GIDS;
	for (int i = 0; i < ctx->gid_count; i++)
		read_gid(dir_path, i, &ctx->gids[i]);
}

static void fill_device_attr(struct ibv_context *context, struct ibv_device_attr *a)
{
	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "%s", EMU_FW_VER);
	/* Read from the same sysfs file ibv_get_device_guid() reads. */
	a->node_guid = ibv_get_device_guid(context->device);
	a->sys_image_guid = a->node_guid;
	a->max_mr_size = EMU_MAX_MR_SIZE;
	a->page_size_cap = EMU_PAGE_SIZE_CAP;
	a->vendor_id = EMU_VENDOR_ID;
	a->vendor_part_id = EMU_VENDOR_PART_ID;
	a->hw_ver = EMU_HW_VER;
	a->max_qp = EMU_MAX_QP;
	a->max_qp_wr = EMU_MAX_QP_WR;
	a->device_cap_flags = EMU_DEVICE_CAP_FLAGS;
	a->max_sge = EMU_MAX_SGE;
	a->max_sge_rd = EMU_MAX_SGE_RD;
	a->max_cq = EMU_MAX_CQ;
	a->max_cqe = EMU_MAX_CQE;
	a->max_mr = EMU_MAX_MR;
	a->max_pd = EMU_MAX_PD;
	a->max_qp_rd_atom = EMU_MAX_QP_RD_ATOM;
	a->max_qp_init_rd_atom = EMU_MAX_QP_RD_ATOM;
	a->max_res_rd_atom = EMU_MAX_RES_RD_ATOM;
	a->atomic_cap = EMU_ATOMIC_CAP;
	a->max_mw = EMU_MAX_MW;
	a->max_ah = EMU_MAX_AH;
	a->max_srq = EMU_MAX_SRQ;
	a->max_srq_wr = EMU_MAX_SRQ_WR;
	a->max_srq_sge = EMU_MAX_SRQ_SGE;
	a->max_pkeys = EMU_MAX_PKEYS;
	a->max_mcast_grp = EMU_MAX_MCAST_GRP;
	a->max_mcast_qp_attach = EMU_MAX_MCAST_QP_ATTACH;
	a->max_total_mcast_qp_attach = EMU_MAX_TOTAL_MCAST_QP_ATTACH;
	a->local_ca_ack_delay = EMU_LOCAL_CA_ACK_DELAY;
	a->phys_port_cnt = EMU_NUM_PORTS;
}

int sr_query_device_ex(struct ibv_context *context, const struct ibv_query_device_ex_input *input,
		       struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ibv_device_attr_ex full;

	/* No input options exist yet; an unknown one must not be silently ignored. */
	if (input && input->comp_mask)
		return EINVAL;
	if (attr_size < sizeof(struct ibv_device_attr))
		return EINVAL;
	memset(&full, 0, sizeof(full));
	fill_device_attr(context, &full.orig_attr);
	full.phys_port_cnt_ex = EMU_NUM_PORTS;
	full.odp_caps.general_caps = EMU_ODP_GENERAL_CAPS;
	full.odp_caps.per_transport_caps.rc_odp_caps = EMU_ODP_RC_CAPS;
	full.odp_caps.per_transport_caps.uc_odp_caps = EMU_ODP_UC_CAPS;
	full.odp_caps.per_transport_caps.ud_odp_caps = EMU_ODP_UD_CAPS;
	/* The caller's struct may be older (smaller) or newer (larger) than ours. */
	if (attr_size > sizeof(full)) {
		memset((char *)attr + sizeof(full), 0, attr_size - sizeof(full));
		attr_size = sizeof(full);
	}
	memcpy(attr, &full, attr_size);
	return 0;
}

int sr_query_port(struct ibv_context *context, uint8_t port_num, struct ibv_port_attr *attr)
{
	if (port_num != 1)
		return EINVAL;
	memset(attr, 0, sizeof(*attr));
	attr->state = IBV_PORT_ACTIVE;
	attr->max_mtu = EMU_PORT_MTU;
	attr->active_mtu = EMU_PORT_MTU;
	attr->gid_tbl_len = to_sr_context(context)->gid_count;
	attr->port_cap_flags = EMU_PORT_CAP_FLAGS;
	attr->max_msg_sz = EMU_MAX_MSG_SIZE;
	attr->pkey_tbl_len = EMU_MAX_PKEYS;
	attr->max_vl_num = 1;
	attr->active_width = EMU_PORT_WIDTH;
	attr->active_speed = EMU_PORT_SPEED;
	attr->phys_state = 5; /* LinkUp */
	attr->link_layer = IBV_LINK_LAYER_ETHERNET;
	return 0;
}
