// SPDX-License-Identifier: MIT
/*
 * deny_syscall NAME[,NAME...] COMMAND [ARGS...]: runs COMMAND with the named system calls
 * refused (EPERM) by a seccomp filter, as container profiles do: io_uring_setup (Docker's
 * default profile) for the engine's epoll fallback, process_vm_readv for the same-host
 * path's fallback to TCP.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

static const struct {
	const char *name;
	int nr;
} known[] = {
	{ "io_uring_setup", __NR_io_uring_setup },
	{ "process_vm_readv", __NR_process_vm_readv },
	{ "process_vm_writev", __NR_process_vm_writev },
};

#define MAX_DENIED 8

static int syscall_number(const char *name)
{
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (!strcmp(known[i].name, name))
			return known[i].nr;
	return -1;
}

int main(int argc, char **argv)
{
	struct sock_filter filter[4 + 2 * MAX_DENIED + 1] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	};
	struct sock_fprog prog = { .filter = filter };
	unsigned short len = 4;
	char names[256], *name, *save;

	if (argc < 3 || strlen(argv[1]) >= sizeof(names)) {
		fprintf(stderr, "usage: deny_syscall NAME[,NAME...] COMMAND [ARGS...]\n");
		return 2;
	}
	strcpy(names, argv[1]);
	for (name = strtok_r(names, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
		int nr = syscall_number(name);

		if (nr < 0 || len == 4 + 2 * MAX_DENIED) {
			fprintf(stderr, "deny_syscall: cannot deny '%s'\n", name);
			return 2;
		}
		filter[len++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
							     (unsigned int)nr, 0, 1);
		filter[len++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
							     SECCOMP_RET_ERRNO | EPERM);
	}
	filter[len++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	prog.len = len;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
		perror("deny_syscall: seccomp");
		return 1;
	}
	execvp(argv[2], argv + 2);
	perror("deny_syscall: exec");
	return 127;
}
