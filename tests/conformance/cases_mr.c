// SPDX-License-Identifier: MIT
/* Memory registration: which access flags, addresses and lengths ibv_reg_mr accepts. */
#include <errno.h>
#include <stdint.h>

#include "conf.h"

enum { MR_PLAIN, MR_LEN0, MR_NULL, MR_IOVA_OFFSET, MR_IOVA_SAME, MR_WHOLE_SPACE };

static void reg_case(const struct conf_case *c)
{
	struct conf_env e;
	uint8_t *buf;
	struct ibv_mr *mr = NULL;

	env_open(&e);
	buf = buf_alloc(2 * BUF_SIZE);
	errno = 0;
	switch (c->b) {
	case MR_PLAIN: mr = ibv_reg_mr(e.pd, buf, BUF_SIZE, c->a); break;
	case MR_LEN0: mr = ibv_reg_mr(e.pd, buf, 0, c->a); break;
	case MR_NULL: mr = ibv_reg_mr(e.pd, NULL, BUF_SIZE, c->a); break;
	/* addr and iova must share their offset in the page */
	case MR_IOVA_OFFSET: mr = ibv_reg_mr_iova(e.pd, buf + 8, BUF_SIZE, 0x100000, c->a); break;
	case MR_IOVA_SAME: mr = ibv_reg_mr_iova(e.pd, buf + 8, BUF_SIZE, 0x100008, c->a); break;
	/* the implicit ODP region: all of the address space */
	case MR_WHOLE_SPACE: mr = ibv_reg_mr(e.pd, NULL, SIZE_MAX, c->a); break;
	}
	out_ret("reg", mr ? 0 : errno ? errno : -1);
	out_end();
}

/* What rkey a region that grants no remote access gets. */
static void rkey_case(const struct conf_case *c)
{
	struct conf_env e;
	struct ibv_mr *mr;

	env_open(&e);
	mr = mr_reg(e.pd, buf_alloc(BUF_SIZE), BUF_SIZE, c->a);
	out("rkey=%s", mr->rkey == mr->lkey ? "lkey" : mr->rkey ? "other" : "0");
	out_end();
}

#define LW IBV_ACCESS_LOCAL_WRITE
/*
 * ibv_rereg_mr changing the access only. c->a: the pd argument is left as garbage, which
 * ibv_rereg_mr(3) allows (pd is read only with IBV_REREG_MR_CHANGE_PD).
 */
static void rereg_case(const struct conf_case *c)
{
	struct conf_env e;
	struct ibv_mr *mr;
	struct ibv_pd *pd;
	int ret;

	env_open(&e);
	mr = mr_reg(e.pd, buf_alloc(BUF_SIZE), BUF_SIZE, IBV_ACCESS_LOCAL_WRITE);
	pd = c->a ? (struct ibv_pd *)(uintptr_t)1 : NULL;
	ret = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, pd, NULL, 0, ACCESS_ALL);
	out("rereg=%s", ret == 0 ? "ok" : ret == IBV_REREG_MR_ERR_INPUT ? "ERR_INPUT" :
	    ret == IBV_REREG_MR_ERR_DONT_FORK_NEW ? "ERR_DONT_FORK_NEW" :
	    ret == IBV_REREG_MR_ERR_DO_FORK_OLD ? "ERR_DO_FORK_OLD" :
	    ret == IBV_REREG_MR_ERR_CMD ? "ERR_CMD" : ret == IBV_REREG_MR_ERR_CMD_AND_DO_FORK_NEW ?
	    "ERR_CMD_AND_DO_FORK_NEW" : "other");
	if (ret)
		out("errno=%s", errno_name(errno));
	out_end();
}

const struct conf_case conf_cases_mr[] = {
	{ "mr_access_none", reg_case, 0, MR_PLAIN },
	{ "mr_local_write", reg_case, LW, MR_PLAIN },
	{ "mr_remote_read", reg_case, IBV_ACCESS_REMOTE_READ, MR_PLAIN },
	{ "mr_remote_write_without_local_write", reg_case, IBV_ACCESS_REMOTE_WRITE, MR_PLAIN },
	{ "mr_remote_atomic_without_local_write", reg_case, IBV_ACCESS_REMOTE_ATOMIC, MR_PLAIN },
	{ "mr_remote_write", reg_case, LW | IBV_ACCESS_REMOTE_WRITE, MR_PLAIN },
	{ "mr_remote_atomic", reg_case, LW | IBV_ACCESS_REMOTE_ATOMIC, MR_PLAIN },
	{ "mr_access_all", reg_case, ACCESS_ALL, MR_PLAIN },
	{ "mr_mw_bind", reg_case, LW | IBV_ACCESS_MW_BIND, MR_PLAIN },
	{ "mr_zero_based", reg_case, LW | IBV_ACCESS_ZERO_BASED, MR_PLAIN },
	{ "mr_hugetlb", reg_case, LW | IBV_ACCESS_HUGETLB, MR_PLAIN },
	{ "mr_relaxed_ordering", reg_case, LW | IBV_ACCESS_RELAXED_ORDERING, MR_PLAIN },
	{ "mr_unknown_bit_16", reg_case, LW | (1 << 16), MR_PLAIN },
	{ "mr_length_zero", reg_case, LW, MR_LEN0 },
	{ "mr_null_addr", reg_case, LW, MR_NULL },
	{ "mr_iova_offset_mismatch", reg_case, LW, MR_IOVA_OFFSET },
	{ "mr_iova_offset_same", reg_case, LW, MR_IOVA_SAME },
	{ "mr_on_demand", reg_case, ACCESS_ALL | IBV_ACCESS_ON_DEMAND, MR_PLAIN },
	{ "mr_implicit_on_demand", reg_case, ACCESS_ALL | IBV_ACCESS_ON_DEMAND, MR_WHOLE_SPACE },
	{ "mr_rkey_of_local_only_region", rkey_case, LW, 0 },
	{ "mr_rkey_of_remote_read_region", rkey_case, LW | IBV_ACCESS_REMOTE_READ, 0 },
	{ "mr_rereg_change_access", rereg_case, 0, 0 },
	{ "mr_rereg_change_access_pd_unset", rereg_case, 1, 0 },
	{ NULL, NULL, 0, 0 },
};
