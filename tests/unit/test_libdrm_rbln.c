// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_libdrm_rbln - libdrm_rbln's rejections that need no device
 *
 * Runs on the build machine, where rbln.ko is not loaded: this is also the
 * "driver absent" case of every function.
 */

#include <fcntl.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "rbln_drm.h"

TEST(enumerate_without_driver)
{
	unsigned int minors[4];

	if (access("/sys/bus/rbln_emu", F_OK) == 0)
		SKIP(return, "rbln.ko is loaded here");
	EXPECT_EQ(0, rbln_drm_enumerate(minors, 4));
	EXPECT_EQ(0, rbln_drm_enumerate(NULL, 0));
}

TEST(enumerate_rejects_null_array)
{
	EXPECT_EQ(-EINVAL, rbln_drm_enumerate(NULL, 1));
}

TEST(open_rejects_null_out)
{
	EXPECT_EQ(-EINVAL, rbln_drm_open(0, NULL));
	EXPECT_EQ(-EINVAL, rbln_drm_open_fd(0, NULL));
}

TEST(open_missing_node)
{
	struct rbln_drm_device *dev = (void *)1;

	EXPECT_EQ(-ENOENT, rbln_drm_open(4000, &dev));
	EXPECT_EQ(NULL, dev);
}

TEST(open_fd_rejects_non_accel)
{
	struct rbln_drm_device *dev = (void *)1;
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

	ASSERT_GE(fd, 0);
	EXPECT_EQ(-ENODEV, rbln_drm_open_fd(fd, &dev));
	EXPECT_EQ(NULL, dev);
	/* The descriptor was duplicated, not taken. */
	EXPECT_EQ(0, close(fd));
}

TEST(open_fd_rejects_bad_fd)
{
	struct rbln_drm_device *dev;

	EXPECT_EQ(-EBADF, rbln_drm_open_fd(-1, &dev));
	EXPECT_EQ(-EBADF, rbln_drm_open_fd(1 << 20, &dev));
}

TEST(close_null)
{
	rbln_drm_close(NULL);
}

TEST(get_param_rejects_null)
{
	uint64_t v;

	EXPECT_EQ(-EINVAL, rbln_drm_get_param(NULL, RBLN_PARAM_ABI_VERSION, &v));
}

TEST(bo_functions_reject_null)
{
	struct rbln_drm_bo_info info;
	uint32_t h;
	void *p;
	int fd;

	EXPECT_EQ(-EINVAL, rbln_drm_bo_create(NULL, 4096, RBLN_BO_HOST, 0, &h, NULL));
	EXPECT_EQ(-EINVAL, rbln_drm_bo_info(NULL, 1, &info));
	EXPECT_EQ(-EINVAL, rbln_drm_bo_info_by_va(NULL, 1ull << 32, &info));
	EXPECT_EQ(-EINVAL, rbln_drm_bo_close(NULL, 1));
	EXPECT_EQ(-EINVAL, rbln_drm_bo_export(NULL, 1, &fd));
	EXPECT_EQ(-EINVAL, rbln_drm_bo_import(NULL, 0, &h));
	EXPECT_EQ(-EINVAL, rbln_drm_bo_mmap(NULL, 1, 0, &p, NULL));
}

TEST(job_functions_reject_null)
{
	uint32_t q;
	int st;

	EXPECT_EQ(-EINVAL, rbln_drm_queue_create(NULL, RBLN_QUEUE_PRIORITY_NORMAL, &q));
	EXPECT_EQ(-EINVAL, rbln_drm_queue_destroy(NULL, 1));
	EXPECT_EQ(-EINVAL, rbln_drm_submit(NULL, 1, 1ull << 32, 8, NULL, 0, NULL, 0, NULL));
	EXPECT_EQ(-EINVAL, rbln_drm_fence_status(NULL, 1, 0, &st));
}

TEST(encoder_writes_exact_packets)
{
	struct rbln_drm_gemm g = {
		.in = RBLN_DTYPE_BF16, .out = RBLN_DTYPE_F32, .flags = RBLN_GEMM_TRANS_B,
		.a = 0x1000, .b = 0x2000, .c = 0x3000, .m = 2, .n = 3, .k = 4,
		.lda = 4, .ldb = 4, .ldc = 3,
	};
	uint64_t buf[32];
	struct rbln_drm_cmd c;
	struct rbln_pkt_gemm *pg;
	struct rbln_pkt_dma_fill *pf;
	struct rbln_pkt_wait *pw;

	rbln_drm_cmd_init(&c, buf, sizeof(buf));
	ASSERT_EQ(0, rbln_drm_cmd_dma_fill(&c, 0x4000, 0xabcd, 64));
	ASSERT_EQ(0, rbln_drm_cmd_gemm(&c, &g));
	ASSERT_EQ(0, rbln_drm_cmd_wait(&c, 0x5008, 0x123456789));
	EXPECT_EQ(sizeof(*pf) + sizeof(*pg) + sizeof(*pw), c.len);
	pf = (void *)buf;
	EXPECT_EQ(RBLN_PKT_HEADER(RBLN_OP_DMA_FILL, 0, 0, 3), pf->header);
	EXPECT_EQ(0xabcd, pf->pattern);
	EXPECT_EQ(0x4000, pf->dst);
	EXPECT_EQ(64, pf->bytes);
	pg = (void *)((char *)buf + sizeof(*pf));
	EXPECT_EQ(RBLN_OP_GEMM, RBLN_PKT_OP(pg->header));
	EXPECT_EQ(RBLN_DTYPE_BF16, RBLN_PKT_DTYPE(pg->header));
	EXPECT_EQ(RBLN_DTYPE_F32, RBLN_PKT_SUB(pg->header));
	EXPECT_EQ(sizeof(*pg) / 8, RBLN_PKT_LEN8(pg->header));
	EXPECT_EQ(RBLN_GEMM_TRANS_B, pg->flags);
	EXPECT_EQ(3, pg->n);
	EXPECT_EQ(3, pg->ldc);
	pw = (void *)((char *)pg + sizeof(*pg));
	EXPECT_EQ(RBLN_PKT_HEADER(RBLN_OP_WAIT, 0, 0, 3), pw->header);
	EXPECT_EQ(0, pw->reserved);
	EXPECT_EQ(0x5008, pw->addr);
	EXPECT_EQ(0x123456789, pw->value);
}

TEST(encoder_rejects_bad_input)
{
	struct rbln_drm_gemm g = { .in = RBLN_DTYPE_F32, .out = RBLN_DTYPE_F32 };
	uint64_t buf[4];
	struct rbln_drm_cmd c;

	rbln_drm_cmd_init(&c, buf, sizeof(buf));
	EXPECT_EQ(-EINVAL, rbln_drm_cmd_unary(&c, RBLN_UNARY_RELU + 1, RBLN_DTYPE_F32, 0, 0, 1));
	EXPECT_EQ(-EINVAL, rbln_drm_cmd_binary(&c, RBLN_BINARY_RSUB, RBLN_DTYPE_F32, 0, 0, 0, 1));
	EXPECT_EQ(-EINVAL, rbln_drm_cmd_scalar(&c, RBLN_BINARY_RDIV + 1, RBLN_DTYPE_I8, 0, 0, 0, 1));
	EXPECT_EQ(-EINVAL, rbln_drm_cmd_cast(&c, RBLN_DTYPE_COUNT, RBLN_DTYPE_F32, 0, 0, 1));
	EXPECT_EQ(-EINVAL, rbln_drm_cmd_reduce(&c, RBLN_REDUCE_MAX + 1, RBLN_DTYPE_F32, 0, 0, 1, 1));
	g.flags = 0x8;
	EXPECT_EQ(-EINVAL, rbln_drm_cmd_gemm(&c, &g));
	EXPECT_EQ(-EINVAL, rbln_drm_cmd_gemm(&c, NULL));
	EXPECT_EQ(0, c.len);
	/* Full: a 32-byte packet in 32 bytes fits, the next is refused whole. */
	EXPECT_EQ(0, rbln_drm_cmd_dma_copy(&c, 0, 0, 8));
	EXPECT_EQ(-ENOSPC, rbln_drm_cmd_nop(&c));
	EXPECT_EQ(32, c.len);
	EXPECT_EQ(-EINVAL, rbln_drm_cmd_nop(NULL));
	EXPECT_EQ(-EINVAL, rbln_drm_cmd_wait(NULL, 0, 1));
	/* 24 bytes in the 8 left: refused, nothing written. */
	rbln_drm_cmd_init(&c, buf, sizeof(buf));
	EXPECT_EQ(0, rbln_drm_cmd_dma_fill(&c, 0, 0, 8));
	EXPECT_EQ(-ENOSPC, rbln_drm_cmd_wait(&c, 0, 1));
	EXPECT_EQ(24, c.len);
}

TEST_HARNESS_MAIN
