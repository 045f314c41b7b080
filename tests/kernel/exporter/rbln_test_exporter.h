/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * rbln_test_exporter.h - the ioctl of the tests' dma-buf exporter
 *
 * Shared by the module and the tests that use it.
 */
#ifndef RBLN_TEST_EXPORTER_H
#define RBLN_TEST_EXPORTER_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define RBLN_TEST_EXPORTER_DEV	"/dev/rbln_test_exporter"

/*
 * The scatterlist an importer gets of the buffer, one page a segment but:
 * @RBLN_TEST_SG_PAGES: nothing else, as every exporter upstream;
 * @RBLN_TEST_SG_OFFSET: the first segment starts RBLN_TEST_SG_SKEW bytes
 *	into its page, and ends with it;
 * @RBLN_TEST_SG_SHORT: the second segment is RBLN_TEST_SG_SKEW bytes
 *	shorter than a page;
 * @RBLN_TEST_SG_TRUNCATED: the last page is missing.
 *
 * The CPU maps the buffer (mmap of the dma-buf) as it is, whatever the shape.
 */
enum rbln_test_sg_shape {
	RBLN_TEST_SG_PAGES,
	RBLN_TEST_SG_OFFSET,
	RBLN_TEST_SG_SHORT,
	RBLN_TEST_SG_TRUNCATED,
	RBLN_TEST_SG_SHAPES,
};

#define RBLN_TEST_SG_SKEW	256

/**
 * struct rbln_test_export - RBLN_TEST_IOCTL_EXPORT
 * @pages: the buffer's size in pages, at least 2; byte i of page p reads
 *	(p + 1) * 16 + i % 16, truncated to a byte
 * @shape: an &enum rbln_test_sg_shape
 * @fd: the dma-buf (out), O_CLOEXEC | O_RDWR
 * @fail_maps: the buffer's first this many maps, at most
 *	RBLN_TEST_MAX_FAIL_MAPS, fail with -EIO, as an exporter's whose
 *	memory is out of reach for a while
 */
struct rbln_test_export {
	__u32 pages;
	__u32 shape;
	__s32 fd;
	__u32 fail_maps;
};

#define RBLN_TEST_MAX_FAIL_MAPS	16

#define RBLN_TEST_IOCTL_EXPORT	_IOWR('r', 0x40, struct rbln_test_export)

#endif /* RBLN_TEST_EXPORTER_H */
