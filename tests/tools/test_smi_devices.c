// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_smi_devices - rbln-smi's devices, from a sysfs tree, natively
 *
 * A fake sysfs of the shape the kernel makes (smi_sysfs points at it):
 * rbln devices whose parent is an emulated NPU of the driver (rbln_emu0,
 * on the rbln_emu bus) and PCI functions (0000:00:03.0, and one in a
 * five-digit domain, as behind a VMD), an accel device of another driver
 * on PCI, and one of rbln on a bus with long device names. Checks the bus
 * ids rbln-smi derives from /sys/class/accel/accelN/device, and how the
 * table, -q, JSON and -i show and take them.
 */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include <json-c/json.h>

#include "kselftest_harness.h"
#include "smi.h"

#define LONG_BUS_ID	"a-platform-device-with-a-long-name.0"

/* mkdir -p of root/@rel. */
static int mkdirs(const char *root, const char *rel)
{
	char path[PATH_MAX], *p;

	if (snprintf(path, sizeof(path), "%s/%s", root, rel) >= (int)sizeof(path))
		return -1;
	for (p = path + strlen(root) + 1; (p = strchr(p, '/')); p++) {
		*p = '\0';
		if (mkdir(path, 0755) && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return mkdir(path, 0755) && errno != EEXIST ? -1 : 0;
}

static int put_file(const char *root, const char *rel, const char *text)
{
	char path[PATH_MAX];
	FILE *f;
	int ret;

	if (snprintf(path, sizeof(path), "%s/%s", root, rel) >= (int)sizeof(path))
		return -1;
	f = fopen(path, "w");
	if (!f)
		return -1;
	ret = fputs(text, f) < 0 ? -1 : 0;
	return fclose(f) || ret ? -1 : 0;
}

static int put_link(const char *root, const char *rel, const char *target)
{
	char path[PATH_MAX];

	if (snprintf(path, sizeof(path), "%s/%s", root, rel) >= (int)sizeof(path))
		return -1;
	return symlink(target, path);
}

/*
 * A parent device at devices/@dev on @bus, bound to @driver, with the
 * attributes of rbln_sysfs.c when @attrs; and accel@minor under it.
 */
static int add_device(const char *root, const char *dev, const char *bus, const char *driver,
		      unsigned int minor, bool attrs, bool emulated, const char *mem_mib)
{
	char rel[512], target[512], text[64];
	const char *up;
	int depth = 2, i;	/* devices/ and the last component */

	for (up = dev; (up = strchr(up, '/')); up++)
		depth++;
	target[0] = '\0';
	for (i = 0; i < depth; i++)
		strcat(target, "../");

	snprintf(rel, sizeof(rel), "devices/%s", dev);
	if (mkdirs(root, rel))
		return -1;
	snprintf(rel, sizeof(rel), "bus/%s/drivers/%s", bus, driver);
	if (mkdirs(root, rel))
		return -1;
	snprintf(rel, sizeof(rel), "devices/%s/driver", dev);
	snprintf(text, sizeof(text), "bus/%s/drivers/%s", bus, driver);
	strcat(target, text);
	if (put_link(root, rel, target))
		return -1;
	snprintf(rel, sizeof(rel), "devices/%s/subsystem", dev);
	*strstr(target, "/drivers/") = '\0';
	if (put_link(root, rel, target))
		return -1;

	if (attrs) {
		static const char *const names[] = { "memory_used", "busy_ns", "reset_count" };
		unsigned long long bytes = strtoull(mem_mib, NULL, 10) << 20;

		for (i = 0; i < 3; i++) {
			snprintf(rel, sizeof(rel), "devices/%s/%s", dev, names[i]);
			if (put_file(root, rel, "0\n"))
				return -1;
		}
		snprintf(rel, sizeof(rel), "devices/%s/memory_total", dev);
		snprintf(text, sizeof(text), "%llu\n", bytes);
		if (put_file(root, rel, text))
			return -1;
		snprintf(rel, sizeof(rel), "devices/%s/num_rings", dev);
		if (put_file(root, rel, "4\n"))
			return -1;
		snprintf(rel, sizeof(rel), "devices/%s/emulated", dev);
		if (put_file(root, rel, emulated ? "1\n" : "0\n"))
			return -1;
	}

	snprintf(rel, sizeof(rel), "class/accel/accel%u", minor);
	if (mkdirs(root, rel))
		return -1;
	snprintf(rel, sizeof(rel), "class/accel/accel%u/dev", minor);
	snprintf(text, sizeof(text), "261:%u\n", minor);
	if (put_file(root, rel, text))
		return -1;
	snprintf(rel, sizeof(rel), "class/accel/accel%u/device", minor);
	snprintf(target, sizeof(target), "../../../devices/%s", dev);
	return put_link(root, rel, target);
}

static void remove_tree(const char *root)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	if (system(cmd))
		fprintf(stderr, "# cannot remove %s\n", root);
}

/* Prints one frame of @snap with @fn into a string; NULL on failure. */
static char *print(int (*fn)(FILE *, const struct smi_view *), struct smi_snapshot *snap)
{
	struct smi_view v = { .snap = snap, .only = -1 };
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	int ret;

	if (!f)
		return NULL;
	ret = fn(f, &v);
	if (fclose(f) || ret) {
		free(text);
		return NULL;
	}
	return text;
}

/* The line of @text holding @needle, as a new string; NULL if none. */
static char *line_with(const char *text, const char *needle)
{
	const char *hit = strstr(text, needle), *start, *end;

	if (!hit)
		return NULL;
	for (start = hit; start > text && start[-1] != '\n'; start--)
		;
	end = strchrnul(hit, '\n');
	return strndup(start, end - start);
}

/* 1 when the line of @text with @needle has @want in it. */
static int line_has(const char *text, const char *needle, const char *want)
{
	char *line = line_with(text, needle);
	int ok = line && strstr(line, want);

	free(line);
	return ok;
}

FIXTURE(sysfs)
{
	char root[64];
	struct smi_snapshot snap;
};

FIXTURE_SETUP(sysfs)
{
	strcpy(self->root, "/tmp/test_smi_devices.XXXXXX");
	ASSERT_NE(NULL, mkdtemp(self->root));
	memset(&self->snap, 0, sizeof(self->snap));

	ASSERT_EQ(0, mkdirs(self->root, "module/rbln/parameters"));
	ASSERT_EQ(0, put_file(self->root, "module/rbln/version", "0.1.0\n"));
	ASSERT_EQ(0, put_file(self->root, "module/rbln/parameters/emu_devices", "1\n"));
	/* The minors are not in the order of their buses. */
	ASSERT_EQ(0, add_device(self->root, "pci0000:00/0000:00:03.0", "pci", "rbln", 0,
				true, true, "512"));
	ASSERT_EQ(0, add_device(self->root, "rbln_emu0", "rbln_emu", "rbln", 1,
				true, true, "64"));
	/* Only this one's driver knows contexts; the others' is older. */
	ASSERT_EQ(0, put_file(self->root, "devices/rbln_emu0/contexts_total", "1023\n"));
	ASSERT_EQ(0, put_file(self->root, "devices/rbln_emu0/contexts_used", "5\n"));
	ASSERT_EQ(0, put_file(self->root, "devices/rbln_emu0/context_steals", "7\n"));
	ASSERT_EQ(0, add_device(self->root, "pci0000:00/0000:00:04.0", "pci", "intel_vpu", 2,
				false, false, "0"));
	ASSERT_EQ(0, add_device(self->root, "pci10000:e1/10000:e1:00.0", "pci", "rbln", 3,
				true, false, "16"));
	ASSERT_EQ(0, add_device(self->root, "platform/" LONG_BUS_ID, "platform", "rbln", 4,
				true, false, "8"));

	smi_sysfs = self->root;
	ASSERT_EQ(0, smi_snapshot_take(&self->snap, false));
}

FIXTURE_TEARDOWN(sysfs)
{
	smi_snapshot_free(&self->snap);
	smi_sysfs = "/sys";
	remove_tree(self->root);
}

TEST_F(sysfs, bus_ids_from_the_parent_device)
{
	struct smi_device *d = self->snap.devices;

	EXPECT_TRUE(self->snap.driver_loaded);
	EXPECT_STREQ("0.1.0", self->snap.driver_version);
	/* Another driver's accel device is not one of ours. */
	ASSERT_EQ(4, self->snap.ndevices);

	EXPECT_EQ(0, d[0].minor);
	EXPECT_STREQ("0000:00:03.0", d[0].bus_id);
	EXPECT_STREQ("pci", d[0].subsystem);
	EXPECT_TRUE(d[0].emulated);	/* a PCI function served by the device model */

	EXPECT_EQ(1, d[1].minor);
	EXPECT_STREQ("rbln_emu0", d[1].bus_id);
	EXPECT_STREQ("rbln_emu", d[1].subsystem);
	EXPECT_TRUE(d[1].emulated);

	EXPECT_EQ(3, d[2].minor);
	EXPECT_STREQ("10000:e1:00.0", d[2].bus_id);
	EXPECT_STREQ("pci", d[2].subsystem);
	EXPECT_FALSE(d[2].emulated);

	EXPECT_EQ(4, d[3].minor);
	EXPECT_STREQ(LONG_BUS_ID, d[3].bus_id);
	EXPECT_STREQ("platform", d[3].subsystem);

	EXPECT_STREQ("0000:00:03.0", smi_device_bus(&d[0]));
	EXPECT_STREQ("emulated", smi_device_bus(&d[1]));
	EXPECT_STREQ("10000:e1:00.0", smi_device_bus(&d[2]));
}

TEST_F(sysfs, the_table_has_a_bus_id_column)
{
	char *text = print(smi_print_table, &self->snap);
	const char *p;
	size_t width = 0;

	ASSERT_NE(NULL, text);
	EXPECT_TRUE(line_has(text, "Bus-Id", "| Node     | Bus-Id           |"));
	EXPECT_TRUE(line_has(text, "accel0", "| RBLN-EMU | accel0   | 0000:00:03.0     |"));
	EXPECT_TRUE(line_has(text, "accel1", "| RBLN-EMU | accel1   | rbln_emu0        |"));
	EXPECT_TRUE(line_has(text, "accel3", "| RBLN-NPU | accel3   | 10000:e1:00.0    |"));
	/* A name longer than the column is cut, so the table stays aligned. */
	EXPECT_TRUE(line_has(text, "accel4", "| a-platform-devic |"));
	EXPECT_EQ(NULL, strstr(text, "accel2"));

	/* Every rule and row of both tables is as wide as the others. */
	for (p = text; *p; p = strchrnul(p, '\n') + (*strchrnul(p, '\n') != '\0')) {
		size_t len = strchrnul(p, '\n') - p;

		if (*p != '|' && *p != '+')
			continue;
		if (!width)
			width = len;
		EXPECT_EQ(width, len);
	}
	EXPECT_EQ(96, width);
	free(text);
}

TEST_F(sysfs, query_shows_bus_id_and_bus)
{
	char *text = print(smi_print_query, &self->snap), *expect;

	ASSERT_NE(NULL, text);
	EXPECT_NE(NULL, strstr(text, "\n    Bus-Id                     : 0000:00:03.0\n"
				      "    Bus                        : pci\n"));
	EXPECT_NE(NULL, strstr(text, "\n    Bus-Id                     : rbln_emu0\n"
				      "    Bus                        : rbln_emu\n"));
	EXPECT_NE(NULL, strstr(text, "\n    Bus-Id                     : " LONG_BUS_ID "\n"));
	ASSERT_LT(0, asprintf(&expect, "Sysfs                      : %s/class/accel/accel0\n",
			      self->root));
	EXPECT_NE(NULL, strstr(text, expect));
	free(expect);
	free(text);
}

TEST_F(sysfs, json_has_the_bus_id)
{
	char *text = print(smi_print_json, &self->snap);
	json_object *doc, *devs, *dev, *val;
	static const char *const want[][3] = {
		/* bus_id, bus, subsystem */
		{ "0000:00:03.0", "0000:00:03.0", "pci" },
		{ "rbln_emu0", "emulated", "rbln_emu" },
		{ "10000:e1:00.0", "10000:e1:00.0", "pci" },
		{ LONG_BUS_ID, LONG_BUS_ID, "platform" },
	};
	size_t i;

	ASSERT_NE(NULL, text);
	doc = json_tokener_parse(text);
	ASSERT_NE(NULL, doc);
	ASSERT_TRUE(json_object_object_get_ex(doc, "devices", &devs));
	ASSERT_EQ(4, json_object_array_length(devs));
	for (i = 0; i < 4; i++) {
		dev = json_object_array_get_idx(devs, i);
		ASSERT_TRUE(json_object_object_get_ex(dev, "bus_id", &val));
		EXPECT_STREQ(want[i][0], json_object_get_string(val));
		ASSERT_TRUE(json_object_object_get_ex(dev, "bus", &val));
		EXPECT_STREQ(want[i][1], json_object_get_string(val));
		ASSERT_TRUE(json_object_object_get_ex(dev, "subsystem", &val));
		EXPECT_STREQ(want[i][2], json_object_get_string(val));
	}
	json_object_put(doc);
	free(text);
}

TEST_F(sysfs, id_takes_bus_ids)
{
	const struct smi_snapshot *s = &self->snap;

	EXPECT_EQ(0, smi_resolve(s, "0000:00:03.0"));
	EXPECT_EQ(0, smi_resolve(s, "00:03.0"));	/* domain 0000 left out */
	EXPECT_EQ(2, smi_resolve(s, "10000:E1:00.0"));	/* hex in either case */
	EXPECT_EQ(-1, smi_resolve(s, "e1:00.0"));	/* only domain 0000 may go */
	EXPECT_EQ(1, smi_resolve(s, "rbln_emu0"));
	EXPECT_EQ(-1, smi_resolve(s, "RBLN_EMU0"));	/* other names are exact */
	EXPECT_EQ(3, smi_resolve(s, LONG_BUS_ID));
	EXPECT_EQ(-1, smi_resolve(s, "0000:00:04.0"));	/* another driver's */
	EXPECT_EQ(-1, smi_resolve(s, "03.0"));
	EXPECT_EQ(1, smi_resolve(s, "accel1"));
	EXPECT_EQ(1, smi_resolve(s, "/dev/accel/accel1"));
	EXPECT_EQ(3, smi_resolve(s, "3"));
	EXPECT_EQ(-1, smi_resolve(s, "4"));
}

/* Per device, whatever the query and JSON outputs: a driver without them is healthy. */
TEST_F(sysfs, contexts_or_unknown_from_an_older_driver)
{
	char *query = print(smi_print_query, &self->snap), *text = print(smi_print_json, &self->snap);
	const struct smi_device *d = self->snap.devices;
	json_object *doc, *devs, *ctx, *val;

	EXPECT_EQ(1023, d[1].contexts_total);
	EXPECT_EQ(5, d[1].contexts_used);
	EXPECT_EQ(7, d[1].context_steals);
	EXPECT_EQ(SMI_UNKNOWN, d[0].contexts_total);
	EXPECT_EQ(SMI_UNKNOWN, d[0].contexts_used);
	EXPECT_EQ(SMI_UNKNOWN, d[0].context_steals);
	EXPECT_EQ(SMI_HEALTH_OK, d[0].health);
	EXPECT_EQ(SMI_HEALTH_OK, d[1].health);

	ASSERT_NE(NULL, query);
	EXPECT_NE(NULL, strstr(query, "\n    Contexts\n"
				       "        Total                  : 1023\n"
				       "        In use                 : 5\n"
				       "        Steals                 : 7\n"));
	EXPECT_NE(NULL, strstr(query, "\n    Contexts\n"
				       "        Total                  : N/A\n"
				       "        In use                 : N/A\n"
				       "        Steals                 : N/A\n"));

	ASSERT_NE(NULL, text);
	doc = json_tokener_parse(text);
	ASSERT_NE(NULL, doc);
	ASSERT_TRUE(json_object_object_get_ex(doc, "devices", &devs));
	ASSERT_TRUE(json_object_object_get_ex(json_object_array_get_idx(devs, 1), "contexts",
					      &ctx));
	ASSERT_TRUE(json_object_object_get_ex(ctx, "used", &val));
	EXPECT_EQ(5, json_object_get_int64(val));
	ASSERT_TRUE(json_object_object_get_ex(ctx, "steals", &val));
	EXPECT_EQ(7, json_object_get_int64(val));
	ASSERT_TRUE(json_object_object_get_ex(json_object_array_get_idx(devs, 0), "contexts",
					      &ctx));
	ASSERT_TRUE(json_object_object_get_ex(ctx, "total", &val));
	EXPECT_EQ(NULL, val);
	json_object_put(doc);
	free(text);
	free(query);
}

TEST(no_sysfs_no_device)
{
	struct smi_snapshot snap;

	smi_sysfs = "/nonexistent";
	ASSERT_EQ(0, smi_snapshot_take(&snap, false));
	smi_sysfs = "/sys";
	EXPECT_FALSE(snap.driver_loaded);
	EXPECT_EQ(0, snap.ndevices);
	smi_snapshot_free(&snap);
}

TEST_HARNESS_MAIN
