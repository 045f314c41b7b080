// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_logical_devices - RBLN_DEVICE_MAP and RBLN_NPUS_PER_DEVICE against
 * the real driver: device counts, rbln_device_summary(), the warning about
 * unused devices, malformed settings, memory statistics of a logical
 * device against the driver's figures for its members, its snapshot,
 * operands gathered device to device, and ops that run out of a member's
 * memory.
 *
 * Run in the VM with emu_devices=4 and nothing else, so that the physical
 * devices are /dev/accel/accel0..3. The registry is fixed at a process's
 * first librbln call, so every setting runs in a child of its own.
 */

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rbln/rbln.h>

#include "kselftest_harness.h"

#define MIB (1ll << 20)

/* What a process saw of the devices under one setting. */
struct probe {
	int count, physical, count_again;
	bool available;
	int64_t summary_len;
	char summary[1024];
	char summary_error[512];
	int set_status;
	char set_error[512];
	bool tensor_refused;
	char stderr_text[1024];
};

static void set_env(const char *name, const char *value)
{
	if (value)
		setenv(name, value, 1);
	else
		unsetenv(name);
}

/* Runs a fresh process under the setting and reports what it saw. */
static void probe(const char *visible, const char *map, const char *npus, struct probe *out)
{
	struct probe *p = mmap(NULL, sizeof(*p), PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int err = memfd_create("stderr", MFD_CLOEXEC), status = -1;
	pid_t pid;
	ssize_t n;

	memset(out, 0, sizeof(*out));
	if (p == MAP_FAILED || err < 0) {
		snprintf(out->stderr_text, sizeof(out->stderr_text), "probe: no shared memory");
		out->count = -100;
		return;
	}
	memset(p, 0, sizeof(*p));
	pid = fork();
	if (pid == 0) {
		int64_t shape[1] = { 4 };
		rbln_tensor *t;

		dup2(err, STDERR_FILENO);
		set_env("RBLN_VISIBLE_DEVICES", visible);
		set_env("RBLN_DEVICE_MAP", map);
		set_env("RBLN_NPUS_PER_DEVICE", npus);
		p->count = rbln_device_count();
		p->physical = rbln_physical_device_count();
		p->available = rbln_is_available();
		p->count_again = rbln_device_count();
		p->summary_len = rbln_device_summary(p->summary, sizeof(p->summary));
		if (p->summary_len < 0)
			snprintf(p->summary_error, sizeof(p->summary_error), "%s", rbln_last_error());
		/* The first index past the logical devices. */
		p->set_status = rbln_set_device(p->count);
		snprintf(p->set_error, sizeof(p->set_error), "%s", rbln_last_error());
		t = rbln_tensor_zeros(shape, 1, RBLN_F32, p->count);
		p->tensor_refused = !t;
		rbln_tensor_free(t);
		_exit(0);
	}
	waitpid(pid, &status, 0);
	memcpy(out, p, sizeof(*out));
	munmap(p, sizeof(*p));
	n = pread(err, out->stderr_text, sizeof(out->stderr_text) - 1, 0);
	out->stderr_text[n > 0 ? n : 0] = '\0';
	close(err);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		out->count = -200;	/* the child crashed */
}

TEST(no_setting_is_one_to_one)
{
	struct probe p;

	probe(NULL, NULL, NULL, &p);
	EXPECT_EQ(4, p.count);
	EXPECT_EQ(4, p.physical);
	EXPECT_STREQ("4 logical devices over 4 physical devices: one logical device per physical device\n"
		     "rbln:0: physical 0 (/dev/accel/accel0)\n"
		     "rbln:1: physical 1 (/dev/accel/accel1)\n"
		     "rbln:2: physical 2 (/dev/accel/accel2)\n"
		     "rbln:3: physical 3 (/dev/accel/accel3)\n", p.summary);
	EXPECT_EQ((int64_t)strlen(p.summary), p.summary_len);
	EXPECT_STREQ("", p.stderr_text);
	/* Empty values are unset. */
	probe(NULL, "", "", &p);
	EXPECT_EQ(4, p.count);
}

TEST(map_groups_two_by_two)
{
	struct probe p;

	probe(NULL, "[0,1],[2,3]", NULL, &p);
	EXPECT_EQ(2, p.count);
	EXPECT_EQ(4, p.physical);
	EXPECT_TRUE(p.available);
	EXPECT_STREQ("2 logical devices over 4 physical devices: RBLN_DEVICE_MAP=\"[0,1],[2,3]\"\n"
		     "rbln:0: physical 0 (/dev/accel/accel0), 1 (/dev/accel/accel1)\n"
		     "rbln:1: physical 2 (/dev/accel/accel2), 3 (/dev/accel/accel3)\n", p.summary);
	EXPECT_STREQ("", p.stderr_text);
	EXPECT_EQ(RBLN_ERROR_NO_DEVICE, p.set_status);
	EXPECT_STREQ("device 2 does not exist (2 devices)", p.set_error);
	EXPECT_TRUE(p.tensor_refused);
}

TEST(npus_per_device_groups_two_by_two)
{
	struct probe p;

	probe(NULL, NULL, "2", &p);
	EXPECT_EQ(2, p.count);
	EXPECT_EQ(4, p.physical);
	EXPECT_STREQ("2 logical devices over 4 physical devices: RBLN_NPUS_PER_DEVICE=2\n"
		     "rbln:0: physical 0 (/dev/accel/accel0), 1 (/dev/accel/accel1)\n"
		     "rbln:1: physical 2 (/dev/accel/accel2), 3 (/dev/accel/accel3)\n", p.summary);
	EXPECT_STREQ("", p.stderr_text);
}

TEST(map_and_npus_agreeing)
{
	struct probe p;

	probe(NULL, "[1,0],[3,2]", "2", &p);
	EXPECT_EQ(2, p.count);
	EXPECT_STREQ("2 logical devices over 4 physical devices: "
		     "RBLN_DEVICE_MAP=\"[1,0],[3,2]\" (RBLN_NPUS_PER_DEVICE=2 agrees)\n"
		     "rbln:0: physical 1 (/dev/accel/accel1), 0 (/dev/accel/accel0)\n"
		     "rbln:1: physical 3 (/dev/accel/accel3), 2 (/dev/accel/accel2)\n", p.summary);
}

TEST(leftovers_are_unused_with_one_warning)
{
	struct probe p;

	probe(NULL, NULL, "3", &p);
	EXPECT_EQ(1, p.count);
	EXPECT_EQ(1, p.count_again);
	EXPECT_EQ(4, p.physical);
	EXPECT_STREQ("1 logical device over 4 physical devices: RBLN_NPUS_PER_DEVICE=3\n"
		     "rbln:0: physical 0 (/dev/accel/accel0), 1 (/dev/accel/accel1), 2 (/dev/accel/accel2)\n"
		     "unused: physical 3 (/dev/accel/accel3)\n", p.summary);
	/* Once, though the registry was asked many times. */
	EXPECT_STREQ("librbln: warning: RBLN_NPUS_PER_DEVICE=3 leaves physical device 3 (/dev/accel/accel3) unused\n",
		     p.stderr_text);
	/* Unused devices are reachable through no index. */
	EXPECT_EQ(RBLN_ERROR_NO_DEVICE, p.set_status);
	EXPECT_STREQ("device 1 does not exist (1 device)", p.set_error);
}

/* Map indices are physical devices after RBLN_VISIBLE_DEVICES. */
TEST(map_over_visible_devices)
{
	struct probe p;

	probe("3,2,1", "[2,0]", NULL, &p);
	EXPECT_EQ(1, p.count);
	EXPECT_EQ(3, p.physical);
	EXPECT_STREQ("1 logical device over 3 physical devices (RBLN_VISIBLE_DEVICES=\"3,2,1\"): "
		     "RBLN_DEVICE_MAP=\"[2,0]\"\n"
		     "rbln:0: physical 2 (/dev/accel/accel1), 0 (/dev/accel/accel3)\n"
		     "unused: physical 1 (/dev/accel/accel2)\n", p.summary);
	EXPECT_STREQ("librbln: warning: RBLN_DEVICE_MAP=\"[2,0]\" leaves physical device 1 (/dev/accel/accel2) unused\n",
		     p.stderr_text);
	probe("0,1", "[0,1],[2,3]", NULL, &p);
	EXPECT_EQ(0, p.count);
	EXPECT_STREQ("RBLN_DEVICE_MAP=\"[0,1],[2,3]\": physical device 2 does not exist (2 physical devices)",
		     p.summary_error);
}

/* A malformed setting: no device, the reason everywhere, no crash, no warning. */
static void expect_rejected(struct __test_metadata *_metadata, const char *map,
			    const char *npus, const char *message)
{
	struct probe p;

	probe(NULL, map, npus, &p);
	EXPECT_EQ(0, p.count) TH_LOG("%s / %s", map, npus);
	EXPECT_EQ(0, p.physical);
	EXPECT_FALSE(p.available);
	EXPECT_EQ(RBLN_ERROR_NO_DEVICE, p.summary_len);
	EXPECT_STREQ(message, p.summary_error);
	EXPECT_EQ(RBLN_ERROR_NO_DEVICE, p.set_status);
	EXPECT_STREQ(message, p.set_error);
	EXPECT_TRUE(p.tensor_refused);
	EXPECT_STREQ("", p.stderr_text);
}

TEST(malformed_settings_leave_no_device)
{
	expect_rejected(_metadata, "[0,1],[1,2]", NULL,
			"RBLN_DEVICE_MAP=\"[0,1],[1,2]\": physical device 1 is in logical devices 0 and 1");
	expect_rejected(_metadata, "[0,4]", NULL,
			"RBLN_DEVICE_MAP=\"[0,4]\": physical device 4 does not exist (4 physical devices)");
	expect_rejected(_metadata, "[0,1],[2,3", NULL,
			"RBLN_DEVICE_MAP=\"[0,1],[2,3\": logical device 1's group has no ']'");
	expect_rejected(_metadata, "[0,1] junk", NULL,
			"RBLN_DEVICE_MAP=\"[0,1] junk\": unexpected \"junk\" after logical device 0's group");
	expect_rejected(_metadata, "[]", NULL, "RBLN_DEVICE_MAP=\"[]\": logical device 0's group is empty");
	expect_rejected(_metadata, "[0,x]", NULL,
			"RBLN_DEVICE_MAP=\"[0,x]\": \"x\" is not a physical device index");
	expect_rejected(_metadata, NULL, "0",
			"RBLN_NPUS_PER_DEVICE=0: a logical device needs at least 1 physical device");
	expect_rejected(_metadata, NULL, "5", "RBLN_NPUS_PER_DEVICE=5 is more than the 4 physical devices");
	expect_rejected(_metadata, "[0,1],[2,3]", "4",
			"RBLN_DEVICE_MAP=\"[0,1],[2,3]\": logical device 0 has 2 members but RBLN_NPUS_PER_DEVICE=4");
}

/* Sum of drm-total-device over this process's files of /dev/accel/accel@minor. */
static long long fdinfo_device_bytes(int minor)
{
	char path[64], node[64], want[32], line[128];
	long long total = 0;
	int fd;

	snprintf(want, sizeof(want), "/dev/accel/accel%d", minor);
	for (fd = 0; fd < 1024; fd++) {
		unsigned long long v;
		ssize_t len;
		char unit[8];
		FILE *f;

		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		len = readlink(path, node, sizeof(node) - 1);
		if (len < 0)
			continue;
		node[len] = '\0';
		if (strcmp(node, want))
			continue;
		snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
		f = fopen(path, "re");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			unit[0] = '\0';
			if (sscanf(line, "drm-total-device: %llu %7s", &v, unit) >= 1)
				total += v << (!strcmp(unit, "MiB") ? 20 : !strcmp(unit, "KiB") ? 10 : 0);
		}
		fclose(f);
	}
	return total;
}

/* Groups the four NPUs into two logical devices of two; their count. */
static int two_pairs(void)
{
	setenv("RBLN_DEVICE_MAP", "[0,1],[2,3]", 1);
	unsetenv("RBLN_NPUS_PER_DEVICE");
	unsetenv("RBLN_VISIBLE_DEVICES");
	return rbln_device_count();
}

/*
 * The statistics of a logical device are its members' together: reserved
 * memory is what the driver reports for the member nodes' files, and the
 * other logical device's members hold nothing.
 */
TEST(memory_stats_add_up_the_members)
{
	int64_t shape[2] = { 4, 64 * 1024 };	/* 1 MiB of f32, 512 KiB per pair of rows */
	struct rbln_memory_stats s, s0;
	rbln_tensor *t;
	float *back;
	int64_t i;

	ASSERT_EQ(2, two_pairs());

	t = rbln_tensor_full(shape, 2, RBLN_F32, 1.5, 1);
	ASSERT_NE(NULL, t) TH_LOG("%s", rbln_last_error());
	ASSERT_EQ(RBLN_OK, rbln_memory_stats(1, &s));
	EXPECT_EQ(MIB, s.lazy_host_bytes);
	EXPECT_EQ(0, s.reserved.current);

	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(t)) TH_LOG("%s", rbln_last_error());
	ASSERT_EQ(RBLN_OK, rbln_memory_stats(1, &s));
	EXPECT_EQ(MIB, s.allocated.current);
	EXPECT_EQ(0, s.lazy_host_bytes);
	EXPECT_LT(0, s.reserved.current);
	EXPECT_EQ(s.reserved.current, fdinfo_device_bytes(2) + fdinfo_device_bytes(3));
	/* Sharded on the first dimension: each member holds two of the rows. */
	EXPECT_EQ(fdinfo_device_bytes(2), fdinfo_device_bytes(3));
	EXPECT_LT(0, fdinfo_device_bytes(3));
	EXPECT_EQ(s.reserved.current, rbln_memory_reserved(1));
	EXPECT_EQ(MIB, rbln_memory_allocated(1));
	ASSERT_EQ(RBLN_OK, rbln_memory_stats(0, &s0));
	EXPECT_EQ(0, s0.reserved.current);
	EXPECT_EQ(0, fdinfo_device_bytes(0) + fdinfo_device_bytes(1));

	back = malloc(MIB);
	ASSERT_NE(NULL, back);
	ASSERT_EQ(RBLN_OK, rbln_tensor_read(t, back, MIB));
	for (i = 0; i < MIB / 4; i++)
		if (back[i] != 1.5f)
			break;
	EXPECT_EQ(MIB / 4, i);
	free(back);

	rbln_tensor_free(t);
	EXPECT_EQ(0, rbln_memory_allocated(1));
	EXPECT_EQ(MIB, rbln_max_memory_allocated(1));
	ASSERT_EQ(RBLN_OK, rbln_empty_cache(1));
	EXPECT_EQ(0, rbln_memory_reserved(1));
	EXPECT_EQ(0, fdinfo_device_bytes(2) + fdinfo_device_bytes(3));
}

/*
 * A peak of a logical device is a value its current figure had, not the
 * sum of its members' peaks: one row of 8 KiB (on the first member alone)
 * freed, then two rows of 4 KiB (one per member) never hold more than
 * 8 KiB together, though the members' peaks add up to 12 KiB.
 */
TEST(peaks_are_values_the_logical_device_had)
{
	int64_t one_row[2] = { 1, 8192 }, two_rows[2] = { 2, 4096 };
	struct rbln_explain_dump d;
	struct rbln_memory_stats s;
	rbln_explain *e;
	rbln_tensor *t;

	ASSERT_EQ(2, two_pairs());
	e = rbln_explain_begin(false);
	ASSERT_NE(NULL, e);

	t = rbln_tensor_zeros(one_row, 2, RBLN_I8, 1);
	ASSERT_NE(NULL, t) TH_LOG("%s", rbln_last_error());
	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(t)) TH_LOG("%s", rbln_last_error());
	EXPECT_EQ(8192, rbln_memory_allocated(1));
	rbln_tensor_free(t);
	EXPECT_EQ(0, rbln_memory_allocated(1));

	t = rbln_tensor_zeros(two_rows, 2, RBLN_I8, 1);
	ASSERT_NE(NULL, t) TH_LOG("%s", rbln_last_error());
	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(t)) TH_LOG("%s", rbln_last_error());
	EXPECT_EQ(8192, rbln_memory_allocated(1));
	EXPECT_EQ(8192, rbln_max_memory_allocated(1));
	ASSERT_EQ(RBLN_OK, rbln_memory_stats(1, &s));
	EXPECT_EQ(8192, s.allocated.current);
	EXPECT_EQ(8192, s.allocated.peak);
	EXPECT_EQ(8192, s.active.current);
	EXPECT_EQ(8192, s.active.peak);
	/* one small segment per member: 4 MiB held, of which 2 MiB became free at once */
	EXPECT_EQ(4 * MIB, s.reserved.current);
	EXPECT_EQ(4 * MIB, s.reserved.peak);
	EXPECT_EQ(4 * MIB, rbln_max_memory_reserved(1));
	EXPECT_EQ(4 * MIB - 8192, s.cached.current);
	EXPECT_EQ(4 * MIB - 8192, s.cached.peak);
	/* the totals and counters still add up the members' */
	EXPECT_EQ(16384, s.allocated.total_allocated);
	EXPECT_EQ(8192, s.allocated.total_freed);
	EXPECT_EQ(2, s.num_device_alloc);

	rbln_tensor_free(t);
	ASSERT_EQ(RBLN_OK, rbln_memory_stats(1, &s));
	EXPECT_EQ(0, s.allocated.current);
	EXPECT_EQ(8192, s.allocated.peak);
	EXPECT_EQ(4 * MIB, s.cached.current);
	EXPECT_EQ(4 * MIB, s.cached.peak);
	/* explain's device memory is the logical devices' figures too */
	ASSERT_EQ(RBLN_OK, rbln_explain_end(e));
	ASSERT_EQ(RBLN_OK, rbln_explain_dump(e, &d));
	EXPECT_EQ(0, d.device_memory.current);
	EXPECT_EQ(8192, d.device_memory.peak);
	rbln_explain_free(e);

	/* reset_peak: the peaks become the logical device's current figures */
	ASSERT_EQ(RBLN_OK, rbln_reset_peak_memory_stats(1));
	EXPECT_EQ(0, rbln_max_memory_allocated(1));
	t = rbln_tensor_zeros(two_rows, 2, RBLN_I8, 1);
	ASSERT_NE(NULL, t);
	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(t));
	rbln_tensor_free(t);
	EXPECT_EQ(8192, rbln_max_memory_allocated(1));
	ASSERT_EQ(RBLN_OK, rbln_empty_cache(1));
	ASSERT_EQ(RBLN_OK, rbln_memory_stats(1, &s));
	EXPECT_EQ(0, s.reserved.current);
	EXPECT_EQ(4 * MIB, s.reserved.peak);
	EXPECT_EQ(0, s.cached.current);
}

/* A logical device's snapshot and history cover each member's allocator. */
TEST(snapshot_covers_the_members)
{
	int64_t shape[2] = { 4, 64 * 1024 };	/* 1 MiB of f32, 512 KiB per member */
	struct rbln_memory_snapshot *snap;
	uint64_t requested = 0;
	rbln_tensor *t;
	char *json;
	size_t i;

	ASSERT_EQ(2, two_pairs());
	ASSERT_EQ(RBLN_OK, rbln_memory_record_history(1, true, false, 100));
	t = rbln_tensor_full(shape, 2, RBLN_F32, 1.5, 1);
	ASSERT_NE(NULL, t) TH_LOG("%s", rbln_last_error());
	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(t)) TH_LOG("%s", rbln_last_error());
	ASSERT_EQ(RBLN_OK, rbln_memory_snapshot(1, &snap)) TH_LOG("%s", rbln_last_error());
	EXPECT_EQ(1, snap->device);
	ASSERT_EQ(2, snap->nsegments);
	for (i = 0; i < 2; i++) {
		EXPECT_EQ((int)i, snap->segments[i].device);
		EXPECT_EQ(2 + (int)i, snap->segments[i].physical_device);
		EXPECT_EQ(512 * 1024, snap->segments[i].requested_size);
		requested += snap->segments[i].requested_size;
	}
	EXPECT_EQ(rbln_memory_allocated(1), (int64_t)requested);
	ASSERT_EQ(2, snap->ntraces);
	for (i = 0; i < 2; i++) {
		const struct rbln_memory_trace *tr = &snap->device_traces[i];

		EXPECT_EQ(2 + (int)i, tr->physical_device);
		ASSERT_EQ(2, tr->nevents);
		/* The defaults: each member's small pool maps its expandable segment. */
		EXPECT_EQ(RBLN_MEMORY_SEGMENT_MAP, tr->events[0].action);
		EXPECT_EQ(RBLN_MEMORY_ALLOC, tr->events[1].action);
		EXPECT_EQ(512 * 1024, tr->events[1].size);
	}
	json = rbln_memory_snapshot_json(snap);
	ASSERT_NE(NULL, json);
	EXPECT_NE(NULL, strstr(json, "\"physical_devices\":[2,3]")) TH_LOG("%s", json);
	free(json);
	rbln_memory_snapshot_free(snap);
	/* the other logical device recorded nothing */
	ASSERT_EQ(RBLN_OK, rbln_memory_snapshot(0, &snap));
	EXPECT_EQ(0, snap->nsegments);
	EXPECT_EQ(0, snap->device_traces[0].nevents + snap->device_traces[1].nevents);
	rbln_memory_snapshot_free(snap);
	rbln_tensor_free(t);
}

/*
 * Device memory in use on NPU @id, peers' hold included, from sysfs; the
 * NPU's bus device, emulated or PCI, is its accel node's parent.
 */
static long long emu_memory_used(int id)
{
	char path[96];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/accel/accel%d/device/memory_used", id);
	f = fopen(path, "re");
	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/*
 * Every member needs all of a matmul's 2-D right-hand side: the other
 * member's rows come device to device, through a peer object that goes
 * with the copy, so the members' memory is all given back after.
 */
TEST(matmul_gathers_device_to_device)
{
	int64_t sa[2] = { 4, 8 }, sb[2] = { 8, 3 };
	struct rbln_explain_dump d;
	rbln_tensor *a, *b, *c;
	rbln_explain *e;
	float out[12], vals[24];
	int i;

	ASSERT_EQ(2, two_pairs());

	for (i = 0; i < 24; i++)
		vals[i] = i;
	a = rbln_tensor_full(sa, 2, RBLN_F32, 1, 1);
	b = rbln_tensor_from_data(vals, sb, 2, RBLN_F32, 1);
	ASSERT_NE(NULL, b) TH_LOG("%s", rbln_last_error());
	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(a));
	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(b));
	e = rbln_explain_begin(false);
	c = rbln_matmul(a, b);
	ASSERT_EQ(RBLN_OK, rbln_explain_end(e));
	ASSERT_EQ(RBLN_OK, rbln_explain_dump(e, &d));
	rbln_explain_free(e);
	ASSERT_NE(NULL, c) TH_LOG("%s", rbln_last_error());
	EXPECT_EQ(0, d.host_bounce.count);
	/* Every row of c holds b's column sums: 3 * (0 + 1 + ... + 7) + 8 * column. */
	ASSERT_EQ(RBLN_OK, rbln_tensor_read(c, out, sizeof(out)));
	for (i = 0; i < 12; i++) {
		EXPECT_EQ(84.0f + 8 * (i % 3), out[i]) TH_LOG("element %d", i);
	}

	rbln_tensor_free(a);
	rbln_tensor_free(b);
	rbln_tensor_free(c);
	ASSERT_EQ(RBLN_OK, rbln_synchronize(1));
	ASSERT_EQ(RBLN_OK, rbln_empty_cache(1));
	EXPECT_EQ(0, emu_memory_used(2));
	EXPECT_EQ(0, emu_memory_used(3));
}

/*
 * An op that copies an operand whole to a member fails cleanly when the
 * member has no room for it, and when the operands themselves do not fit:
 * out of memory, and the logical device holds what it held before.
 */
TEST(gathers_run_out_of_memory_cleanly)
{
	int64_t vec[1] = { 6 * MIB };	/* 24 MiB of f32: 12 MiB per 32 MiB member */
	int64_t big[2] = { 4, 5 * MIB }, rhs[2] = { 5 * MIB, 1 };
	rbln_tensor *v, *a, *b;
	int64_t before;

	ASSERT_EQ(2, two_pairs());

	v = rbln_tensor_full(vec, 1, RBLN_F32, 1, 0);
	ASSERT_NE(NULL, v);
	ASSERT_EQ(RBLN_OK, rbln_tensor_materialize(v)) TH_LOG("%s", rbln_last_error());
	before = rbln_memory_allocated(0);
	/* Gathered, the 24 MiB do not fit beside the first member's 12 MiB. */
	EXPECT_EQ(NULL, rbln_sum(v));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "sum: device 0: out of device memory"))
		TH_LOG("%s", rbln_last_error());
	EXPECT_EQ(before, rbln_memory_allocated(0));
	rbln_tensor_free(v);

	/* 80 MiB on the left do not fit at all: nothing is gathered, nothing kept. */
	a = rbln_tensor_zeros(big, 2, RBLN_F32, 0);
	b = rbln_tensor_zeros(rhs, 2, RBLN_F32, 0);
	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, b);
	EXPECT_EQ(NULL, rbln_matmul(a, b));
	EXPECT_NE(NULL, strstr(rbln_last_error(), "out of device memory"))
		TH_LOG("%s", rbln_last_error());
	EXPECT_EQ(0, rbln_memory_allocated(0));
	rbln_tensor_free(a);
	rbln_tensor_free(b);
}

TEST(summary_arguments)
{
	char small[8];
	int64_t full;

	unsetenv("RBLN_DEVICE_MAP");
	unsetenv("RBLN_VISIBLE_DEVICES");
	setenv("RBLN_NPUS_PER_DEVICE", "2", 1);
	/* Like snprintf: the whole length, whatever fits, always terminated. */
	full = rbln_device_summary(NULL, 0);
	EXPECT_LT(8, full);
	memset(small, 'x', sizeof(small));
	EXPECT_EQ(full, rbln_device_summary(small, sizeof(small)));
	EXPECT_STREQ("2 logic", small);
	EXPECT_EQ(RBLN_ERROR_INVALID, rbln_device_summary(NULL, 8));
	EXPECT_STREQ("rbln_device_summary: NULL buffer of 8 bytes", rbln_last_error());
}

TEST_HARNESS_MAIN
