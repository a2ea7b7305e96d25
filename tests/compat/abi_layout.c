// SPDX-License-Identifier: MIT
/*
 * Prints the layout of every private structure softrdma shares with libibverbs, one line
 * per member ("struct.member offset size"), then the constants it uses. Built twice by
 * tests/compat/CMakeLists.txt: against the release's own driver.h and against
 * kernel-abi/provider_abi.h; abi_layout.sh compares the two. The ops are those the
 * release's driver.h lists (release_ops.h, generated from it): a slot of the release that
 * we lack does not compile, one we have that it lacks changes sizeof.
 */
#include <stdio.h>

#include "kernel-abi/provider_abi.h"

#define SIZE(s) printf("sizeof %s %zu\n", #s, sizeof(struct s))
#define MEMBER(s, m) \
	printf("%s.%s %zu %zu\n", #s, #m, offsetof(struct s, m), sizeof(((struct s *)0)->m))
#define VALUE(c) printf("%s %lld\n", #c, (long long)(c))

static void ops_layout(void)
{
	SIZE(verbs_context_ops);
#define OP(name) MEMBER(verbs_context_ops, name);
#include "release_ops.h"
#undef OP
}

static void device_layout(void)
{
	SIZE(verbs_device_ops);
	MEMBER(verbs_device_ops, name);
	MEMBER(verbs_device_ops, match_min_abi_version);
	MEMBER(verbs_device_ops, match_max_abi_version);
	MEMBER(verbs_device_ops, match_table);
	MEMBER(verbs_device_ops, static_providers);
	MEMBER(verbs_device_ops, match_device);
	MEMBER(verbs_device_ops, alloc_context);
	MEMBER(verbs_device_ops, import_context);
	MEMBER(verbs_device_ops, alloc_device);
	MEMBER(verbs_device_ops, uninit_device);
	SIZE(verbs_device);
	MEMBER(verbs_device, device);
	MEMBER(verbs_device, ops);
	MEMBER(verbs_device, refcount);
	MEMBER(verbs_device, entry);
	MEMBER(verbs_device, sysfs);
	MEMBER(verbs_device, core_support);
	SIZE(verbs_match_ent);
	MEMBER(verbs_match_ent, driver_data);
	MEMBER(verbs_match_ent, u.modalias);
	MEMBER(verbs_match_ent, u.driver_id);
	MEMBER(verbs_match_ent, vendor);
	MEMBER(verbs_match_ent, device);
	MEMBER(verbs_match_ent, kind);
	VALUE(VERBS_MATCH_SENTINEL);
	VALUE(VERBS_MATCH_MODALIAS);
}

static void object_layout(void)
{
	SIZE(verbs_mr);
	MEMBER(verbs_mr, ibv_mr);
	MEMBER(verbs_mr, mr_type);
	MEMBER(verbs_mr, access);
	VALUE(IBV_MR_TYPE_MR);
	SIZE(verbs_qp);
	MEMBER(verbs_qp, qp);
	MEMBER(verbs_qp, qp_ex);
	MEMBER(verbs_qp, comp_mask);
	MEMBER(verbs_qp, xrcd);
	VALUE(VERBS_QP_XRCD);
	VALUE(VERBS_QP_EX);
	SIZE(verbs_cq);
	MEMBER(verbs_cq, cq);
	MEMBER(verbs_cq, cq_ex);
	SIZE(verbs_srq);
	MEMBER(verbs_srq, srq);
	MEMBER(verbs_srq, srq_type);
	MEMBER(verbs_srq, xrcd);
	MEMBER(verbs_srq, cq);
	MEMBER(verbs_srq, srq_num);
	SIZE(verbs_xrcd);
	MEMBER(verbs_xrcd, xrcd);
	MEMBER(verbs_xrcd, comp_mask);
	MEMBER(verbs_xrcd, handle);
	VALUE(VERBS_XRCD_HANDLE);
}

int main(void)
{
	ops_layout();
	device_layout();
	object_layout();
	return 0;
}
