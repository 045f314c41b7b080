// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_smi_fdinfo - rbln-smi's parser of /proc/PID/fdinfo, natively
 *
 * What the driver prints (drm_print_memory_stats() chooses between bytes,
 * KiB and MiB), what another driver prints, and what a tool must ignore:
 * unknown keys and units, malformed values, over-long lines.
 */

#include <stdio.h>
#include <string.h>

#include "kselftest_harness.h"
#include "smi.h"

struct parsed {
	int ret;
	bool is_rbln;
	uint64_t id, engine;
	struct smi_region dev, host;
	struct smi_fault fault;
};

static struct parsed parse(const char *text)
{
	struct parsed p = { 0 };
	struct smi_fdinfo info;
	FILE *f = fmemopen((void *)text, strlen(text), "r");

	if (!f) {
		p.ret = -1000;
		return p;
	}
	p.ret = smi_parse_fdinfo(f, &info);
	fclose(f);
	p.is_rbln = info.is_rbln;
	p.id = info.client_id;
	p.engine = info.engine_ns;
	p.dev = info.device;
	p.host = info.host;
	p.fault = info.fault;
	return p;
}

TEST(what_the_driver_prints)
{
	struct parsed p = parse("pos:\t0\nflags:\t02100002\nmnt_id:\t34\nino:\t107\n"
				"drm-driver:\trbln\ndrm-client-id:\t42\n"
				"drm-engine-npu:\t712041093 ns\ndrm-engine-capacity-npu:\t4\n"
				"drm-total-device:\t24 MiB\ndrm-shared-device:\t0\n"
				"drm-active-device:\t512 KiB\ndrm-resident-device:\t24 MiB\n"
				"drm-total-host:\t2052 KiB\ndrm-shared-host:\t4096\n"
				"drm-active-host:\t0\ndrm-resident-host:\t4 KiB\n");

	ASSERT_EQ(0, p.ret);
	EXPECT_TRUE(p.is_rbln);
	EXPECT_EQ(42, p.id);
	EXPECT_EQ(712041093, p.engine);
	EXPECT_EQ(24 << 20, p.dev.total);
	EXPECT_EQ(0, p.dev.shared);
	EXPECT_EQ(512 << 10, p.dev.active);
	EXPECT_EQ(24 << 20, p.dev.resident);
	EXPECT_EQ(2052 << 10, p.host.total);
	EXPECT_EQ(4096, p.host.shared);
	EXPECT_EQ(4 << 10, p.host.resident);
}

TEST(no_fault_until_one_banned_the_context)
{
	struct parsed p = parse("drm-driver:\trbln\ndrm-client-id:\t3\n");

	ASSERT_EQ(0, p.ret);
	EXPECT_STREQ("", p.fault.kind);
	p = parse("drm-driver:\trbln\ndrm-client-id:\t3\nrbln-fault:\tunmapped 0x1000\n");
	ASSERT_EQ(0, p.ret);
	EXPECT_STREQ("unmapped", p.fault.kind);
	EXPECT_EQ(0x1000, p.fault.addr);
	p = parse("drm-driver:\trbln\ndrm-client-id:\t3\n"
		  "rbln-fault:\twrite-protected 0x4000000fe000\n");
	EXPECT_STREQ("write-protected", p.fault.kind);
	EXPECT_EQ(0x4000000fe000ull, p.fault.addr);
}

TEST(malformed_faults_are_ignored)
{
	static const char *const bad[] = {
		"unmapped", "0x1000", "unmapped 0x1000 extra", "unmapped zz",
		"Unmapped 0x1000", "a-kind-of-fault-longer-than-the-field 0x1000", "",
	};
	char text[256];
	unsigned int i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text),
			 "drm-driver:\trbln\ndrm-client-id:\t3\nrbln-fault:\t%s\n", bad[i]);
		struct parsed p = parse(text);

		ASSERT_EQ(0, p.ret);
		EXPECT_TRUE(p.is_rbln);
		EXPECT_STREQ("", p.fault.kind) TH_LOG("'%s'", bad[i]);
	}
}

TEST(larger_units)
{
	struct parsed p = parse("drm-driver: rbln\ndrm-client-id: 1\n"
				"drm-total-device: 3 GiB\ndrm-total-host: 2 TiB\n");

	ASSERT_EQ(0, p.ret);
	EXPECT_EQ(3ull << 30, p.dev.total);
	EXPECT_EQ(2ull << 40, p.host.total);
}

TEST(another_driver)
{
	struct parsed p = parse("drm-driver:\tamdgpu\ndrm-client-id:\t7\n"
				"drm-total-vram:\t12 MiB\n");

	ASSERT_EQ(0, p.ret);
	EXPECT_FALSE(p.is_rbln);
}

TEST(not_drm_at_all)
{
	struct parsed p = parse("pos:\t0\nflags:\t0100002\nmnt_id:\t25\nino:\t1\n");

	ASSERT_EQ(0, p.ret);
	EXPECT_FALSE(p.is_rbln);
}

TEST(no_client_id_is_no_client)
{
	struct parsed p = parse("drm-driver:\trbln\ndrm-total-device:\t4 MiB\n");

	ASSERT_EQ(0, p.ret);
	EXPECT_FALSE(p.is_rbln);
}

TEST(malformed_values_are_ignored)
{
	struct parsed p = parse("drm-driver:\trbln\ndrm-client-id:\t5\n"
				"drm-total-device:\t3 PiB\ndrm-shared-device:\t-4\n"
				"drm-active-device:\tx\ndrm-resident-device:\t99999999999999999999999\n"
				"drm-total-host:\t18014398509481984 TiB\n"
				"drm-engine-npu:\t12 us\ndrm-purgeable-device:\t1 MiB\n"
				"drm-total-gtt:\t1 MiB\ndrm-:\t1\ndrm-total-:\t1\nnocolon\n");

	ASSERT_EQ(0, p.ret);
	EXPECT_TRUE(p.is_rbln);
	EXPECT_EQ(5, p.id);
	EXPECT_EQ(0, p.dev.total);
	EXPECT_EQ(0, p.dev.shared);
	EXPECT_EQ(0, p.dev.active);
	EXPECT_EQ(0, p.dev.resident);
	EXPECT_EQ(0, p.host.total);
	EXPECT_EQ(0, p.engine);
}

TEST(bad_client_id)
{
	struct parsed p = parse("drm-driver:\trbln\ndrm-client-id:\t12x\n");

	ASSERT_EQ(0, p.ret);
	EXPECT_FALSE(p.is_rbln);
}

TEST(over_long_line_is_skipped_whole)
{
	char text[2048];
	size_t n;

	n = snprintf(text, sizeof(text), "drm-driver:\trbln\nx-long:\t");
	memset(text + n, 'a', 1000);
	/* What follows the long line on the same line must not be a key. */
	n += 1000;
	n += snprintf(text + n, sizeof(text) - n,
		      "drm-total-device: 1 MiB\ndrm-client-id:\t3\ndrm-total-device:\t2 MiB\n");
	struct parsed p = parse(text);

	ASSERT_EQ(0, p.ret);
	EXPECT_TRUE(p.is_rbln);
	EXPECT_EQ(3, p.id);
	EXPECT_EQ(2 << 20, p.dev.total);
}

TEST(last_line_without_newline)
{
	struct parsed p = parse("drm-driver:\trbln\ndrm-client-id:\t9\ndrm-total-device:\t8 MiB");

	ASSERT_EQ(0, p.ret);
	EXPECT_TRUE(p.is_rbln);
	EXPECT_EQ(8 << 20, p.dev.total);
}

TEST_HARNESS_MAIN
