// SPDX-License-Identifier: MIT
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run_dir.h"

#define MAX_LINKS 40	/* as the kernel's path walk */

static int refuse(char *why, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, RUN_DIR_WHY_LEN, fmt, ap);
	va_end(ap);
	errno = err;
	return -1;
}

static bool owner_trusted(uid_t uid)
{
	return uid == 0 || uid == geteuid();
}

/* Only root or we can change what is in this directory. */
static bool only_trusted_write(const struct stat *st)
{
	return owner_trusted(st->st_uid) && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

/* A directory on the way: nobody else can replace what we find in it. */
static int check_on_the_way(const struct stat *st, const char *shown, char *why)
{
	if (!S_ISDIR(st->st_mode))
		return refuse(why, ENOTDIR, "%s is not a directory", shown);
	if (!owner_trusted(st->st_uid))
		return refuse(why, EPERM, "%s is owned by uid %u, neither root nor you (uid %u)",
			      shown, (unsigned)st->st_uid, (unsigned)geteuid());
	if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !(st->st_mode & S_ISVTX))
		return refuse(why, EPERM, "%s can be written by other users and is not sticky",
			      shown);
	return 0;
}

static int check_private(const struct stat *st, const char *shown, char *why)
{
	if (st->st_uid != geteuid())
		return refuse(why, EPERM, "%s is owned by uid %u, not by you (uid %u)", shown,
			      (unsigned)st->st_uid, (unsigned)geteuid());
	if (st->st_mode & 077)
		return refuse(why, EPERM, "%s has mode %04o: it must be private (0700)", shown,
			      (unsigned)(st->st_mode & 07777));
	return 0;
}

/* Splits the next component off *p into comp; false at the end of the path. */
static bool next_component(const char **p, char comp[NAME_MAX + 1], bool *last, char *why,
			   int *err)
{
	size_t len;

	while (**p == '/')
		(*p)++;
	if (!**p)
		return false;
	len = strcspn(*p, "/");
	if (len > NAME_MAX) {
		*err = refuse(why, ENAMETOOLONG, "a path component is too long");
		return false;
	}
	memcpy(comp, *p, len);
	comp[len] = 0;
	*p += len;
	*last = !(*p)[strspn(*p, "/")];
	if (!strcmp(comp, "..")) {
		*err = refuse(why, EINVAL, "the path has a '..' component: give it resolved");
		return false;
	}
	return true;
}

/* Continues the walk through the link comp in fd: *rest becomes its target + what was left. */
static int follow_link(int *fd, struct stat *dir_st, const char *comp, char *todo,
		       const char **rest, char *shown, char *why)
{
	char target[PATH_MAX], joined[2 * PATH_MAX];
	ssize_t n = readlinkat(*fd, comp, target, sizeof(target) - 1);

	if (n < 0)
		return refuse(why, errno, "cannot read the link %s: %s", shown, strerror(errno));
	target[n] = 0;
	if ((size_t)snprintf(joined, sizeof(joined), "%s/%s", target, *rest) >= PATH_MAX)
		return refuse(why, ENAMETOOLONG, "%s: the path is too long", shown);
	strcpy(todo, joined);
	*rest = todo;
	if (target[0] == '/') {
		close(*fd);
		*fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (*fd < 0 || fstat(*fd, dir_st))
			return refuse(why, errno, "cannot open /: %s", strerror(errno));
		strcpy(shown, "");
	} else {
		shown[strlen(shown) - strlen(comp) - 1] = 0;	/* back to the link's directory */
	}
	return 0;
}

int run_dir_open(const char *path, bool private_dir, char why[RUN_DIR_WHY_LEN])
{
	char todo[PATH_MAX], comp[NAME_MAX + 1], shown[PATH_MAX + NAME_MAX + 2] = "";
	const char *rest = todo;
	struct stat st;
	int fd, links = 0, err = 0;
	bool last;

	if (path[0] != '/')
		return refuse(why, EINVAL, "%s is not an absolute path", path);
	if (strlen(path) >= sizeof(todo))
		return refuse(why, ENAMETOOLONG, "the path is too long");
	strcpy(todo, path);
	fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st))
		return refuse(why, errno, "cannot open /: %s", strerror(errno));
	if (check_on_the_way(&st, "/", why))
		goto fail;
	while (next_component(&rest, comp, &last, why, &err)) {
		int next;

		if (!strcmp(comp, "."))
			continue;
		if (strlen(shown) + strlen(comp) + 2 > sizeof(shown)) {
			refuse(why, ENAMETOOLONG, "the path is too long");
			goto fail;
		}
		strcat(strcat(shown, "/"), comp);
		next = openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0) {
			struct stat lst;

			if (fstatat(fd, comp, &lst, AT_SYMLINK_NOFOLLOW) || !S_ISLNK(lst.st_mode)) {
				refuse(why, errno, "cannot open the directory %s: %s", shown,
				       strerror(errno));
				goto fail;
			}
			if (private_dir && last) {
				refuse(why, ELOOP, "%s is a symbolic link, not a directory", shown);
				goto fail;
			}
			if (!only_trusted_write(&st) || !owner_trusted(lst.st_uid)) {
				refuse(why, EPERM, "%s is a symbolic link where other users could "
					"have put it", shown);
				goto fail;
			}
			if (++links > MAX_LINKS) {
				refuse(why, ELOOP, "%s: too many symbolic links", path);
				goto fail;
			}
			if (follow_link(&fd, &st, comp, todo, &rest, shown, why))
				goto fail;
			continue;
		}
		close(fd);
		fd = next;
		if (fstat(fd, &st)) {
			refuse(why, errno, "cannot stat %s: %s", shown, strerror(errno));
			goto fail;
		}
		if (check_on_the_way(&st, shown, why))
			goto fail;
	}
	if (err || (private_dir && check_private(&st, path, why)))
		goto fail;
	return fd;
fail:
	err = errno;
	close(fd);
	errno = err;
	return -1;
}

int run_dir_make_temp(int parent_fd, const char *prefix, char *name, size_t name_len,
		      char why[RUN_DIR_WHY_LEN])
{
	static const char chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
	struct stat st;
	int fd;

	if (strlen(prefix) + 8 > name_len)
		return refuse(why, ENAMETOOLONG, "%s: name too long", prefix);
	for (int attempt = 0; attempt < 100; attempt++) {
		unsigned char r[6];
		size_t at = (size_t)snprintf(name, name_len, "%s.", prefix);

		if (getrandom(r, sizeof(r), 0) != sizeof(r))
			return refuse(why, errno, "getrandom: %s", strerror(errno));
		for (size_t i = 0; i < sizeof(r); i++)
			name[at + i] = chars[r[i] % (sizeof(chars) - 1)];
		name[at + sizeof(r)] = 0;
		if (!mkdirat(parent_fd, name, 0700))
			break;
		if (errno != EEXIST)
			return refuse(why, errno, "cannot create %s: %s", name, strerror(errno));
		if (attempt == 99)
			return refuse(why, EEXIST, "no free name for %s.XXXXXX", prefix);
	}
	/* Only we can rename or replace the entry we just made (the parent was checked). */
	if (fchmodat(parent_fd, name, 0700, 0))
		return refuse(why, errno, "cannot chmod %s: %s", name, strerror(errno));
	fd = openat(parent_fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return refuse(why, errno, "cannot open %s: %s", name, strerror(errno));
	if (fstat(fd, &st) || check_private(&st, name, why)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Inside the tree everything is ours and nobody else's to write. */
static int check_ours(int fd, const char *shown, bool dir, char *why)
{
	struct stat st;

	if (fstat(fd, &st))
		return refuse(why, errno, "cannot stat %s: %s", shown, strerror(errno));
	if (dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
		return refuse(why, EINVAL, "%s is not a %s", shown, dir ? "directory" : "regular file");
	if (st.st_uid != geteuid())
		return refuse(why, EPERM, "%s is owned by uid %u, not by you (uid %u)", shown,
			      (unsigned)st.st_uid, (unsigned)geteuid());
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return refuse(why, EPERM, "%s can be written by other users", shown);
	if (!dir && st.st_nlink != 1)
		return refuse(why, EPERM, "%s has %lu links", shown, (unsigned long)st.st_nlink);
	return 0;
}

int run_dir_open_sub(int dir_fd, const char *rel, bool readable, char why[RUN_DIR_WHY_LEN])
{
	char comp[NAME_MAX + 1];
	const char *p = rel;
	int fd = dup(dir_fd), err = 0;
	bool last = false;

	if (fd < 0)
		return refuse(why, errno, "dup: %s", strerror(errno));
	while (next_component(&p, comp, &last, why, &err)) {
		int flags = (last && readable ? O_RDONLY : O_PATH) | O_DIRECTORY | O_NOFOLLOW |
			    O_CLOEXEC;
		int next = openat(fd, comp, flags);

		if (next < 0) {
			err = refuse(why, errno, "cannot open %s (in %s): %s", comp, rel,
				     strerror(errno));
			break;
		}
		close(fd);
		fd = next;
		if ((err = check_ours(fd, rel, true, why)))
			break;
	}
	if (err) {
		err = errno;
		close(fd);
		errno = err;
		return -1;
	}
	return fd;
}

int run_dir_open_file(int dir_fd, const char *name, int flags, mode_t mode,
		      char why[RUN_DIR_WHY_LEN])
{
	int fd, err;

	if (flags & O_CREAT)
		flags |= O_EXCL;
	fd = openat(dir_fd, name, flags | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0)
		return refuse(why, errno, "cannot open %s: %s", name, strerror(errno));
	if (check_ours(fd, name, false, why)) {
		err = errno;
		close(fd);
		errno = err;
		return -1;
	}
	return fd;
}

int run_dir_replace_file(int dir_fd, const char *name, const char *text,
			 char why[RUN_DIR_WHY_LEN])
{
	char tmp[NAME_MAX + 1];
	size_t len = strlen(text), done = 0;
	unsigned int r;
	int fd, err = 0;

	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		return refuse(why, errno, "getrandom: %s", strerror(errno));
	if ((size_t)snprintf(tmp, sizeof(tmp), ".%.200s.%d.%08x", name, (int)getpid(), r) >=
	    sizeof(tmp))
		return refuse(why, ENAMETOOLONG, "%s: name too long", name);
	fd = run_dir_open_file(dir_fd, tmp, O_WRONLY | O_CREAT, 0644, why);
	if (fd < 0)
		return -1;
	while (done < len) {
		ssize_t n = write(fd, text + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = n < 0 ? errno : EIO;
			break;
		}
		done += (size_t)n;
	}
	if (close(fd) && !err)
		err = errno;
	if (!err && renameat(dir_fd, tmp, dir_fd, name))
		err = errno;
	if (err) {
		unlinkat(dir_fd, tmp, 0);
		return refuse(why, err, "cannot write %s: %s", name, strerror(err));
	}
	return 0;
}
