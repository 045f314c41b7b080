// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_fdinfo - the sysadmin's view: /proc/<pid>/fdinfo/<fd> checked key by
 * key against Documentation/gpu/drm-usage-stats.rst, and the debugfs list
 * of buffer objects per client
 */

#include <ctype.h>
#include <inttypes.h>
#include <pthread.h>
#include <regex.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "kselftest_harness.h"
#include "rbln_test.h"

#define PAGE 4096ull
#define MAX_KEYS 64

struct fdinfo {
	int n;
	char key[MAX_KEYS][64];
	char value[MAX_KEYS][128];
};

static int read_fdinfo(int fd, struct fdinfo *info)
{
	char path[64], line[256];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	info->n = 0;
	while (fgets(line, sizeof(line), f) && info->n < MAX_KEYS) {
		char *colon = strchr(line, ':'), *v;

		if (!colon || strncmp(line, "drm-", 4))
			continue;
		*colon = '\0';
		for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
			;
		v[strcspn(v, "\n")] = '\0';
		snprintf(info->key[info->n], sizeof(info->key[0]), "%.63s", line);
		snprintf(info->value[info->n], sizeof(info->value[0]), "%.127s", v);
		info->n++;
	}
	fclose(f);
	return 0;
}

static const char *get(const struct fdinfo *info, const char *key)
{
	int i;

	for (i = 0; i < info->n; i++)
		if (!strcmp(info->key[i], key))
			return info->value[i];
	return NULL;
}

static long long mem(const struct fdinfo *info, const char *stat, const char *region)
{
	char key[64];

	snprintf(key, sizeof(key), "drm-%s-%s", stat, region);
	return rbln_test_fdinfo_bytes(get(info, key));
}

FIXTURE(fdinfo) {
	struct rbln_drm_device *dev;
	int fd;
};

FIXTURE_SETUP(fdinfo)
{
	ASSERT_EQ(0, rbln_test_open(0, &self->dev));
	self->fd = rbln_drm_fd(self->dev);
}

FIXTURE_TEARDOWN(fdinfo)
{
	rbln_drm_close(self->dev);
	EXPECT_EQ(0, rbln_test_mem_used(0));
}

/*
 * Every drm- key is one the spec defines, with a value of the spec's
 * form; the mandatory ones are there; every region has all its keys.
 */
TEST_F(fdinfo, keys_follow_the_spec)
{
	static const char *const regions[] = { "device", "host" };
	static const char *const stats[] = { "total", "shared", "active", "resident" };
	struct fdinfo info;
	regex_t mem_key, engine_key, capacity_key;
	unsigned int r, s;
	int i;

	ASSERT_EQ(0, regcomp(&mem_key,
			     "^drm-(total|shared|active|resident|purgeable)-[a-z0-9_]+$",
			     REG_EXTENDED | REG_NOSUB));
	ASSERT_EQ(0, regcomp(&engine_key, "^drm-engine-[a-z0-9_]+$", REG_EXTENDED | REG_NOSUB));
	ASSERT_EQ(0, regcomp(&capacity_key, "^drm-engine-capacity-[a-z0-9_]+$",
			     REG_EXTENDED | REG_NOSUB));
	ASSERT_EQ(0, read_fdinfo(self->fd, &info));
	for (i = 0; i < info.n; i++) {
		const char *k = info.key[i], *v = info.value[i];

		if (!strcmp(k, "drm-driver")) {
			EXPECT_STREQ("rbln", v);
		} else if (!strcmp(k, "drm-client-id")) {
			EXPECT_TRUE(isdigit((unsigned char)v[0])) TH_LOG("%s: %s", k, v);
		} else if (!strcmp(k, "drm-pdev")) {
			/* DRM's, for a PCI device: its address. */
			char name[RBLN_DEV_NAME_MAX];

			ASSERT_EQ(0, rbln_test_name(0, name));
			EXPECT_STREQ(name, v);
		} else if (!regexec(&mem_key, k, 0, NULL, 0)) {
			EXPECT_GE(rbln_test_fdinfo_bytes(v), 0) TH_LOG("%s: '%s' is not a size", k, v);
		} else if (!regexec(&capacity_key, k, 0, NULL, 0)) {
			EXPECT_TRUE(isdigit((unsigned char)v[0]) && !v[strspn(v, "0123456789")])
				TH_LOG("%s: '%s' is not a count", k, v);
		} else if (!regexec(&engine_key, k, 0, NULL, 0)) {
			unsigned long long ns;
			char unit[4] = "";

			EXPECT_EQ(2, sscanf(v, "%llu %3s", &ns, unit)) TH_LOG("%s: '%s'", k, v);
			EXPECT_STREQ("ns", unit);
		} else {
			EXPECT_TRUE(0) TH_LOG("key %s is not in the spec", k);
		}
	}
	regfree(&mem_key);
	regfree(&engine_key);
	regfree(&capacity_key);

	EXPECT_NE(NULL, get(&info, "drm-driver"));
	EXPECT_NE(NULL, get(&info, "drm-client-id"));
	/* DRM gives the address of a PCI device, and nothing for others. */
	EXPECT_EQ(rbln_test_on_pci(), get(&info, "drm-pdev") != NULL);
	EXPECT_STREQ("0 ns", get(&info, "drm-engine-npu"));
	EXPECT_NE(NULL, get(&info, "drm-engine-capacity-npu"));
	for (r = 0; r < 2; r++) {
		for (s = 0; s < 4; s++) {
			char key[64];

			snprintf(key, sizeof(key), "drm-%s-%s", stats[s], regions[r]);
			EXPECT_EQ(0, rbln_test_fdinfo_bytes(get(&info, key))) TH_LOG("%s", key);
		}
	}
}

TEST_F(fdinfo, client_ids_are_unique)
{
	struct rbln_drm_device *other;
	struct fdinfo a, b;

	ASSERT_EQ(0, rbln_test_open(0, &other));
	ASSERT_EQ(0, read_fdinfo(self->fd, &a));
	ASSERT_EQ(0, read_fdinfo(rbln_drm_fd(other), &b));
	EXPECT_STRNE(get(&a, "drm-client-id"), get(&b, "drm-client-id"));
	rbln_drm_close(other);
}

TEST_F(fdinfo, memory_by_region)
{
	uint32_t hd, hh, hs;
	struct fdinfo info;
	char *p;
	int fd;

	ASSERT_EQ(0, rbln_drm_bo_create(self->dev, 3 << 20, RBLN_BO_DEVICE, 0, &hd, NULL));
	ASSERT_EQ(0, rbln_drm_bo_create(self->dev, 2 << 20, RBLN_BO_HOST, 0, &hh, NULL));
	ASSERT_EQ(0, read_fdinfo(self->fd, &info));
	EXPECT_EQ(3 << 20, mem(&info, "total", "device"));
	EXPECT_EQ(3 << 20, mem(&info, "resident", "device"));
	EXPECT_EQ(2 << 20, mem(&info, "total", "host"));
	/* Host pages come on first touch. */
	EXPECT_EQ(0, mem(&info, "resident", "host"));
	EXPECT_EQ(0, mem(&info, "shared", "host"));

	ASSERT_EQ(0, rbln_drm_bo_mmap(self->dev, hh, PROT_READ | PROT_WRITE, (void **)&p, NULL));
	memset(p, 1, 2 << 20);
	ASSERT_EQ(0, read_fdinfo(self->fd, &info));
	EXPECT_EQ(2 << 20, mem(&info, "resident", "host"));
	munmap(p, 2 << 20);

	/* An exported object is shared. */
	ASSERT_EQ(0, rbln_drm_bo_create(self->dev, 1 << 20, RBLN_BO_DEVICE, 0, &hs, NULL));
	ASSERT_EQ(0, rbln_drm_bo_export(self->dev, hs, &fd));
	ASSERT_EQ(0, read_fdinfo(self->fd, &info));
	EXPECT_EQ(4 << 20, mem(&info, "total", "device"));
	EXPECT_EQ(1 << 20, mem(&info, "shared", "device"));
	close(fd);

	ASSERT_EQ(0, rbln_drm_bo_close(self->dev, hd));
	ASSERT_EQ(0, rbln_drm_bo_close(self->dev, hh));
	ASSERT_EQ(0, rbln_drm_bo_close(self->dev, hs));
	ASSERT_EQ(0, read_fdinfo(self->fd, &info));
	EXPECT_EQ(0, mem(&info, "total", "device"));
	EXPECT_EQ(0, mem(&info, "total", "host"));
}

/*
 * An object mapped through VM_BIND keeps its memory after its handle is
 * closed: the file counts it, once however often it is mapped, until it
 * is unbound. Otherwise a process could hold device memory that neither
 * its fdinfo nor rbln-smi shows.
 */
TEST_F(fdinfo, bound_objects_count_without_handles)
{
	struct fdinfo info;
	uint32_t hd, hh;
	uint64_t va;

	ASSERT_EQ(0, rbln_drm_vm_reserve(self->dev, 8 << 20, 0, &va));
	ASSERT_EQ(0, rbln_drm_bo_create(self->dev, 4 << 20, RBLN_BO_DEVICE, RBLN_BO_NO_VA, &hd,
					NULL));
	ASSERT_EQ(0, rbln_drm_bo_create(self->dev, 2 << 20, RBLN_BO_HOST, RBLN_BO_NO_VA, &hh, NULL));
	ASSERT_EQ(0, rbln_test_vm_map(self->dev, va, 2 << 20, hd, 0, 0));
	ASSERT_EQ(0, rbln_test_vm_map(self->dev, va + (2 << 20), 4 << 20, hd, 0, 0));
	ASSERT_EQ(0, rbln_test_vm_map(self->dev, va + (6 << 20), 2 << 20, hh, 0, 0));
	ASSERT_EQ(0, read_fdinfo(self->fd, &info));
	EXPECT_EQ(4 << 20, mem(&info, "total", "device"));
	EXPECT_EQ(2 << 20, mem(&info, "total", "host"));

	ASSERT_EQ(0, rbln_drm_bo_close(self->dev, hd));
	ASSERT_EQ(0, rbln_drm_bo_close(self->dev, hh));
	ASSERT_EQ(0, read_fdinfo(self->fd, &info));
	EXPECT_EQ(4 << 20, mem(&info, "total", "device"));
	EXPECT_EQ(4 << 20, mem(&info, "resident", "device"));
	EXPECT_EQ(0, mem(&info, "shared", "device"));
	EXPECT_EQ(2 << 20, mem(&info, "total", "host"));
	EXPECT_EQ(4 << 20, rbln_test_mem_used(0));

	/* Half of the object unbound: still held by the rest. */
	ASSERT_EQ(0, rbln_test_vm_unmap(self->dev, va, 2 << 20));
	ASSERT_EQ(0, read_fdinfo(self->fd, &info));
	EXPECT_EQ(4 << 20, mem(&info, "total", "device"));
	ASSERT_EQ(0, rbln_test_vm_unmap(self->dev, va, 8 << 20));
	ASSERT_EQ(0, read_fdinfo(self->fd, &info));
	EXPECT_EQ(0, mem(&info, "total", "device"));
	EXPECT_EQ(0, mem(&info, "total", "host"));
	EXPECT_EQ(0, rbln_test_mem_used_settled(0));
	EXPECT_EQ(0, rbln_drm_vm_release(self->dev, va));
}

struct reader {
	int fd;
	atomic_bool stop;
	int reads, failed;
};

static void *read_until_stopped(void *arg)
{
	struct reader *r = arg;
	struct fdinfo info;

	while (!atomic_load(&r->stop)) {
		if (read_fdinfo(r->fd, &info) || mem(&info, "total", "device") < 0)
			r->failed++;
		r->reads++;
	}
	return NULL;
}

/*
 * fdinfo read while objects are bound, their handles closed and unbound,
 * none of it waited for: every read finds a whole set of keys, and the
 * file ends up holding nothing (KASAN: no object read after it is freed).
 */
TEST_F(fdinfo, reads_race_binds_and_closes)
{
	struct reader r = { .fd = self->fd };
	struct fdinfo info;
	pthread_t thread;
	uint64_t va;
	uint32_t h;
	int i;

	ASSERT_EQ(0, rbln_drm_vm_reserve(self->dev, 4 << 20, 0, &va));
	ASSERT_EQ(0, pthread_create(&thread, NULL, read_until_stopped, &r));
	for (i = 0; i < 200; i++) {
		ASSERT_EQ(0, rbln_drm_bo_create(self->dev, 1 << 20, i % 2 ? RBLN_BO_HOST :
						RBLN_BO_DEVICE, RBLN_BO_NO_VA, &h, NULL));
		ASSERT_EQ(0, rbln_drm_vm_map(self->dev, va + (i % 4) * (1 << 20), 1 << 20, h, 0, 0,
					     NULL, 0, NULL));
		ASSERT_EQ(0, rbln_drm_bo_close(self->dev, h));
		if (i < 199)
			ASSERT_EQ(0, rbln_drm_vm_unmap(self->dev, va + (i % 4) * (1 << 20), 1 << 20,
						       NULL, 0, NULL));
	}
	/* The bind queue runs in order: once the last unbind is done, all are. */
	ASSERT_EQ(0, rbln_test_vm_unmap(self->dev, va + 3 * (1 << 20), 1 << 20));
	atomic_store(&r.stop, true);
	pthread_join(thread, NULL);
	EXPECT_LT(0, r.reads);
	EXPECT_EQ(0, r.failed);
	ASSERT_EQ(0, read_fdinfo(self->fd, &info));
	EXPECT_EQ(0, mem(&info, "total", "device"));
	EXPECT_EQ(0, mem(&info, "total", "host"));
	EXPECT_EQ(0, rbln_drm_vm_release(self->dev, va));
}

TEST_F(fdinfo, debugfs_lists_objects_per_client)
{
	char path[96], line[256], want[64];
	int found_client = 0, found_bo = 0;
	struct fdinfo info;
	uint64_t va;
	uint32_t h;
	FILE *f;

	ASSERT_EQ(0, rbln_drm_bo_create(self->dev, 5 * PAGE, RBLN_BO_DEVICE,
					RBLN_BO_READ_ONLY, &h, &va));
	ASSERT_EQ(0, read_fdinfo(self->fd, &info));
	/* DRM names the directory after the parent device. */
	ASSERT_EQ(0, rbln_test_debugfs_path(0, "bos", path, sizeof(path)));
	f = fopen(path, "re");
	ASSERT_NE(NULL, f) TH_LOG("no %s", path);
	snprintf(want, sizeof(want), "client %s pid %d ", get(&info, "drm-client-id"), getpid());
	while (fgets(line, sizeof(line), f)) {
		unsigned long long a, size;
		char place[16], perm[8];

		if (!strncmp(line, want, strlen(want))) {
			found_client = 1;
			continue;
		}
		if (found_client && !found_bo &&
		    sscanf(line, " %llx %llu %15s %7s", &a, &size, place, perm) == 4 &&
		    a == va) {
			EXPECT_EQ(5 * PAGE, size);
			EXPECT_STREQ("device", place);
			EXPECT_STREQ("r-", perm);
			found_bo = 1;
		}
	}
	fclose(f);
	EXPECT_TRUE(found_client);
	EXPECT_TRUE(found_bo);
}

TEST_HARNESS_MAIN
