// SPDX-License-Identifier: MIT
/* The extended CQ polling API over the classic poll_cq; see cq_ex.h for the contract. */
#include <errno.h>
#include <string.h>

#include "provider/cq_ex.h"

static struct cq_ex_poller *poller_of(struct ibv_cq_ex *cqx)
{
	return (struct cq_ex_poller *)((char *)cqx - CQ_EX_POLLER_OFFSET);
}

/*
 * Polls the next completion into the current entry and publishes its status and wr_id, which
 * ibv_create_cq_ex(3) makes plain fields of the CQ. ENOENT when the CQ is empty.
 */
static int poll_one(struct ibv_cq_ex *cqx, struct cq_ex_poller *poller)
{
	int polled = poller->poll_cq(ibv_cq_ex_to_cq(cqx), 1, &poller->current);

	if (polled < 0)
		return -polled;
	if (!polled)
		return ENOENT;
	cqx->status = poller->current.status;
	cqx->wr_id = poller->current.wr_id;
	return 0;
}

static int start_poll(struct ibv_cq_ex *cqx, struct ibv_poll_cq_attr *attr)
{
	struct cq_ex_poller *poller = poller_of(cqx);
	int ret;

	/* No attribute is defined yet; one we do not know could change what polling means. */
	if (attr && attr->comp_mask)
		return EINVAL;
	pthread_mutex_lock(&poller->lock);
	ret = poll_one(cqx, poller);
	if (ret)
		pthread_mutex_unlock(&poller->lock);
	return ret;
}

/* On failure the lock stays held: the man page has end_poll follow a failed next_poll. */
static int next_poll(struct ibv_cq_ex *cqx)
{
	return poll_one(cqx, poller_of(cqx));
}

static void end_poll(struct ibv_cq_ex *cqx)
{
	pthread_mutex_unlock(&poller_of(cqx)->lock);
}

/* The readers of the current completion: one per ibv_wc field, all alike. */
#define CQ_EX_READER(type, field)					\
	static type read_##field(struct ibv_cq_ex *cqx)			\
	{								\
		return poller_of(cqx)->current.field;			\
	}

CQ_EX_READER(enum ibv_wc_opcode, opcode)
CQ_EX_READER(uint32_t, vendor_err)
CQ_EX_READER(uint32_t, byte_len)
CQ_EX_READER(__be32, imm_data)
CQ_EX_READER(uint32_t, qp_num)
CQ_EX_READER(uint32_t, src_qp)
CQ_EX_READER(unsigned int, wc_flags)
CQ_EX_READER(uint32_t, slid)
CQ_EX_READER(uint8_t, sl)
CQ_EX_READER(uint8_t, dlid_path_bits)

int cq_ex_init(struct ibv_cq_ex *cqx, uint64_t wc_flags, cq_ex_poll_fn poll_cq)
{
	struct cq_ex_poller *poller = poller_of(cqx);

	if (wc_flags & ~CQ_EX_SUPPORTED_WC_FLAGS)
		return EOPNOTSUPP;

	memset(poller, 0, sizeof(*poller));
	pthread_mutex_init(&poller->lock, NULL);
	poller->poll_cq = poll_cq;

	cqx->status = IBV_WC_SUCCESS;
	cqx->wr_id = 0;
	cqx->start_poll = start_poll;
	cqx->next_poll = next_poll;
	cqx->end_poll = end_poll;
	/*
	 * Every field of a struct ibv_wc is readable whatever wc_flags asked for: the man page
	 * only limits what the application may read, and a classic ibv_wc has them all.
	 */
	cqx->read_opcode = read_opcode;
	cqx->read_vendor_err = read_vendor_err;
	cqx->read_byte_len = read_byte_len;
	cqx->read_imm_data = read_imm_data;
	cqx->read_qp_num = read_qp_num;
	cqx->read_src_qp = read_src_qp;
	cqx->read_wc_flags = read_wc_flags;
	cqx->read_slid = read_slid;
	cqx->read_sl = read_sl;
	cqx->read_dlid_path_bits = read_dlid_path_bits;
	cqx->read_completion_ts = NULL;
	cqx->read_cvlan = NULL;
	cqx->read_flow_tag = NULL;
	cqx->read_tm_info = NULL;
	cqx->read_completion_wallclock_ns = NULL;
	return 0;
}

void cq_ex_destroy(struct ibv_cq_ex *cqx)
{
	struct cq_ex_poller *poller = poller_of(cqx);

	pthread_mutex_destroy(&poller->lock);
	memset(poller, 0, sizeof(*poller));
}
