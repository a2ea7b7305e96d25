/* SPDX-License-Identifier: MIT */
/*
 * What a kernel driver would give libibverbs for completion and async events, done with
 * pipes. libibverbs' own ibv_get_cq_event() reads one 8-byte record from channel->fd and
 * treats it as the CQ's user handle, so the engine writes exactly that record; the same
 * holds for ibv_get_async_event() and its 16-byte record on context->async_fd.
 */
#ifndef SOFTRDMA_COMP_CHANNEL_H
#define SOFTRDMA_COMP_CHANNEL_H

#include <stdint.h>
#include <string.h>
#include <infiniband/verbs.h>

/* The kernel's struct ib_uverbs_comp_event_desc. */
struct uverbs_comp_event {
	uint64_t cq_handle;
};

/* The kernel's struct ib_uverbs_async_event_desc. */
struct uverbs_async_event {
	uint64_t element;
	uint32_t event_type;
	uint32_t reserved;
};

#define SOFTRDMA_CHANNEL_MAGIC 0x53524348u /* "SRCH" */

/* Created by the interposed ibv_create_comp_channel for softrdma contexts only. */
struct softrdma_comp_channel {
	struct ibv_comp_channel channel;	/* what libibverbs and the application see */
	int notify_fd;				/* write end of the pipe behind channel.fd */
	uint32_t magic;
};

#define SOFTRDMA_PROVIDER_NAME "softrdma"

#endif
