// SPDX-License-Identifier: GPL-2.0-only
/*
 * procs.c - the processes using rbln devices, from /proc/PID/fdinfo
 *
 * An open rbln node is a DRM client; its fdinfo has the keys of the kernel's
 * Documentation/gpu/drm-usage-stats.rst. A process may hold one client
 * through several descriptors (dup(), SCM_RIGHTS): each drm-client-id is
 * counted once per process. A client shared by several processes (fork())
 * is listed under each of them, as the kernel shows it under each.
 *
 * The descriptors of another user's process cannot be read without
 * privileges: such processes are counted as skipped, which is no error. A
 * process or descriptor that goes away during the scan is skipped too.
 */

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include "smi.h"

/* "3 MiB", "512 KiB", "4096": bytes. 0 or -EINVAL. */
static int parse_size(const char *s, uint64_t *out)
{
	static const struct {
		const char *unit;
		unsigned int shift;
	} units[] = {
		{ "", 0 }, { "KiB", 10 }, { "MiB", 20 }, { "GiB", 30 }, { "TiB", 40 },
	};
	unsigned long long v;
	unsigned int i;
	char *end;

	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	while (*end == ' ' || *end == '\t')
		end++;
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].unit))
			continue;
		if (units[i].shift && v > (UINT64_MAX >> units[i].shift))
			return -EINVAL;
		*out = (uint64_t)v << units[i].shift;
		return 0;
	}
	return -EINVAL;
}

/* "123 ns": nanoseconds. */
static int parse_ns(const char *s, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || strcmp(end, " ns"))
		return -EINVAL;
	*out = v;
	return 0;
}

static uint64_t *region_field(struct smi_region *r, const char *stat)
{
	if (!strcmp(stat, "total"))
		return &r->total;
	if (!strcmp(stat, "shared"))
		return &r->shared;
	if (!strcmp(stat, "active"))
		return &r->active;
	if (!strcmp(stat, "resident"))
		return &r->resident;
	return NULL;
}

/* "unmapped 0x10000000": the kind of fault and its address; else none. */
static void parse_fault(const char *s, struct smi_fault *fault)
{
	unsigned long long addr;
	char kind[sizeof(fault->kind)];
	int end = 0;

	if (sscanf(s, "%23[a-z0-9-] %llx%n", kind, &addr, &end) != 2 || s[end])
		return;
	memcpy(fault->kind, kind, sizeof(kind));
	fault->addr = addr;
}

/*
 * Parses the fdinfo of one descriptor into @info. @info->is_rbln tells
 * whether it is an rbln DRM client with a client id; the rest is only
 * meaningful then. Keys it does not know, and values it cannot parse, are
 * ignored, as drm-usage-stats.rst asks of tools. 0, or -errno of a read
 * error.
 */
int smi_parse_fdinfo(FILE *f, struct smi_fdinfo *info)
{
	bool driver = false, have_id = false;
	char line[256];

	memset(info, 0, sizeof(*info));
	while (fgets(line, sizeof(line), f)) {
		char *key = line, *value, *colon, *end;
		struct smi_region *region = NULL;
		uint64_t *field;
		size_t len;

		len = strlen(line);
		if (len && line[len - 1] != '\n' && !feof(f)) {
			/* An over-long line: no key of ours; drop the rest. */
			int c;

			while ((c = fgetc(f)) != EOF && c != '\n')
				;
			continue;
		}
		while (len && (line[len - 1] == '\n' || line[len - 1] == ' '))
			line[--len] = '\0';
		colon = strchr(line, ':');
		if (!colon)
			continue;
		*colon = '\0';
		value = colon + 1;
		while (*value == ' ' || *value == '\t')
			value++;

		if (!strcmp(key, "drm-driver")) {
			driver = !strcmp(value, SMI_DRIVER);
		} else if (!strcmp(key, "drm-client-id")) {
			unsigned long long id;

			errno = 0;
			id = strtoull(value, &end, 10);
			if (!errno && end != value && !*end) {
				info->client_id = id;
				have_id = true;
			}
		} else if (!strcmp(key, "drm-engine-npu")) {
			parse_ns(value, &info->engine_ns);
		} else if (!strcmp(key, SMI_DRIVER "-fault")) {
			parse_fault(value, &info->fault);
		} else if (!strncmp(key, "drm-", 4)) {
			/* drm-<stat>-<region> */
			char *dash = strrchr(key + 4, '-');

			if (!dash)
				continue;
			*dash = '\0';
			if (!strcmp(dash + 1, "device"))
				region = &info->device;
			else if (!strcmp(dash + 1, "host"))
				region = &info->host;
			if (!region)
				continue;
			field = region_field(region, key + 4);
			if (field)
				parse_size(value, field);
		}
	}
	if (ferror(f))
		return -EIO;
	info->is_rbln = driver && have_id;
	return 0;
}

/* The device whose node has device number @rdev, or NULL. */
static const struct smi_device *find_device(const struct smi_snapshot *snap, dev_t rdev)
{
	size_t i;

	for (i = 0; i < snap->ndevices; i++)
		if (snap->devices[i].rdev == rdev)
			return &snap->devices[i];
	return NULL;
}

/* Could @target, where a descriptor points, be an accel node? */
static bool maybe_accel(const char *target)
{
	const char *base = strrchr(target, '/');

	if (target[0] != '/' || !base || strncmp(base + 1, "accel", 5))
		return false;
	base += 6;
	if (!*base)
		return false;
	while (*base)
		if (!isdigit((unsigned char)*base++))
			return false;
	return true;
}

/* The entry of @pid on device @dev_index, created if needed; NULL: ENOMEM. */
static struct smi_process *proc_entry(struct smi_snapshot *snap, size_t *cap,
				      size_t first, pid_t pid, unsigned int dev_index)
{
	struct smi_process *p;
	size_t i;

	for (i = first; i < snap->nprocs; i++)
		if (snap->procs[i].dev_index == dev_index)
			return &snap->procs[i];
	if (snap->nprocs == *cap) {
		size_t ncap = *cap ? 2 * *cap : 16;

		p = realloc(snap->procs, ncap * sizeof(*p));
		if (!p)
			return NULL;
		snap->procs = p;
		*cap = ncap;
	}
	p = &snap->procs[snap->nprocs++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	p->dev_index = dev_index;
	return p;
}

static int add_client(struct smi_process *p, const struct smi_fdinfo *info)
{
	struct smi_fault *faults;
	uint64_t *ids;
	size_t i;

	for (i = 0; i < p->nclients; i++)
		if (p->clients[i] == info->client_id)
			return 0;	/* another descriptor of the same file */
	ids = realloc(p->clients, (p->nclients + 1) * sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	p->clients = ids;
	faults = realloc(p->faults, (p->nclients + 1) * sizeof(*faults));
	if (!faults)
		return -ENOMEM;
	p->faults = faults;
	p->clients[p->nclients] = info->client_id;
	p->faults[p->nclients++] = info->fault;
	p->engine_ns += info->engine_ns;
	p->device.total += info->device.total;
	p->device.shared += info->device.shared;
	p->device.active += info->device.active;
	p->device.resident += info->device.resident;
	p->host.total += info->host.total;
	p->host.shared += info->host.shared;
	p->host.active += info->host.active;
	p->host.resident += info->host.resident;
	return 0;
}

/* Reads one descriptor's fdinfo; -ENOENT when it was closed meanwhile. */
static int read_fdinfo(int infodir, const char *fd, struct smi_fdinfo *info)
{
	FILE *f;
	int ifd, ret;

	ifd = openat(infodir, fd, O_RDONLY | O_CLOEXEC);
	if (ifd < 0)
		return -errno;
	f = fdopen(ifd, "r");
	if (!f) {
		ret = -errno;
		close(ifd);
		return ret;
	}
	ret = smi_parse_fdinfo(f, info);
	fclose(f);
	return ret;
}

/* Is @pid a kernel thread? They have no descriptors to hide. */
static bool kernel_thread(pid_t pid)
{
	char path[64], buf[1024], *paren;
	unsigned int flags;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (smi_read_string(path, buf, sizeof(buf)))
		return false;
	paren = strrchr(buf, ')');
	if (!paren || sscanf(paren + 1, " %*c %*d %*d %*d %*d %*d %u", &flags) != 1)
		return false;
	return flags & 0x00200000;	/* PF_KTHREAD */
}

/* Errors that are ours, not the scanned process's: they stop the scan. */
static bool fatal(int err)
{
	return err == -ENOMEM || err == -EMFILE || err == -ENFILE;
}

static int scan_process(struct smi_snapshot *snap, size_t *cap, pid_t pid)
{
	size_t first = snap->nprocs, i;
	char path[64], target[PATH_MAX];
	int fddir, infodir, ret = 0;
	struct dirent *de;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/fdinfo", (int)pid);
	infodir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (infodir < 0) {
		ret = -errno;
		goto out_skip;
	}
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	fddir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fddir < 0) {
		ret = -errno;
		close(infodir);
		goto out_skip;
	}
	dir = fdopendir(fddir);
	if (!dir) {
		ret = -errno;
		close(fddir);
		close(infodir);
		return ret;
	}

	while ((de = readdir(dir))) {
		const struct smi_device *d;
		struct smi_fdinfo info;
		struct smi_process *p;
		struct stat st;
		ssize_t n;

		if (de->d_name[0] == '.')
			continue;
		n = readlinkat(fddir, de->d_name, target, sizeof(target) - 1);
		if (n < 0)
			continue;	/* closed meanwhile */
		target[n] = '\0';
		/*
		 * Look only at what may be an accel node: stat() of anything
		 * else (a file on a dead NFS server) could block.
		 */
		if (!maybe_accel(target))
			continue;
		if (fstatat(fddir, de->d_name, &st, 0) || !S_ISCHR(st.st_mode))
			continue;
		d = find_device(snap, st.st_rdev);
		if (!d)
			continue;
		ret = read_fdinfo(infodir, de->d_name, &info);
		if (ret) {
			/* Closed meanwhile, or the process is exiting. */
			if (fatal(ret))
				break;
			ret = 0;
			continue;
		}
		if (!info.is_rbln)
			continue;
		p = proc_entry(snap, cap, first, pid, d->index);
		if (!p) {
			ret = -ENOMEM;
			break;
		}
		ret = add_client(p, &info);
		if (ret)
			break;
	}
	closedir(dir);
	close(infodir);

	if (!ret && snap->nprocs > first) {
		char name[sizeof(snap->procs[0].name)];

		snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
		if (smi_read_string(path, name, sizeof(name)))
			strcpy(name, "?");
		for (i = first; i < snap->nprocs; i++)
			strcpy(snap->procs[i].name, name);
	}
	return ret;

out_skip:
	/* Another user's process, or one that exited: not an error. */
	if ((ret == -EACCES || ret == -EPERM) && !kernel_thread(pid))
		snap->procs_skipped++;
	return fatal(ret) ? ret : 0;
}

static int cmp_proc(const void *a, const void *b)
{
	const struct smi_process *x = a, *y = b;

	if (x->dev_index != y->dev_index)
		return x->dev_index < y->dev_index ? -1 : 1;
	return (x->pid > y->pid) - (x->pid < y->pid);
}

/* Adds every process holding an rbln device of @snap. 0 or -errno. */
int smi_read_processes(struct smi_snapshot *snap)
{
	size_t cap = 0;
	struct dirent *de;
	DIR *dir;
	int ret = 0;

	if (!snap->ndevices)
		return 0;
	dir = opendir("/proc");
	if (!dir)
		return -errno;
	while ((errno = 0, de = readdir(dir))) {
		char *end;
		long pid;

		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		pid = strtol(de->d_name, &end, 10);
		if (*end || pid <= 0 || pid > INT_MAX)
			continue;
		ret = scan_process(snap, &cap, (pid_t)pid);
		if (ret)
			break;
	}
	if (!ret && errno)
		ret = -errno;
	closedir(dir);
	if (!ret)
		qsort(snap->procs, snap->nprocs, sizeof(*snap->procs), cmp_proc);
	return ret;
}
