// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_test_exporter - a dma-buf exporter for the tests, whose
 * scatterlists have the shapes an importer must check for
 *
 * Every exporter a user reaches upstream hands out segments that start and
 * end on page boundaries and cover the buffer; nothing in the dma-buf
 * contract says one must. This one can be told not to, so that the tests
 * see what rbln.ko makes of such a buffer. Not for anything but tests.
 */

#include <linux/dma-buf.h>
#include <linux/dma-mapping.h>
#include <linux/file.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/overflow.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "rbln_test_exporter.h"

#define RBLN_TEST_MAX_PAGES	1024

struct rbln_test_buf {
	enum rbln_test_sg_shape shape;
	atomic_t fail_maps;
	unsigned int npages;
	struct page *pages[] __counted_by(npages);
};

static struct sg_table *rbln_test_map(struct dma_buf_attachment *attach,
				      enum dma_data_direction dir)
{
	struct rbln_test_buf *buf = attach->dmabuf->priv;
	unsigned int n = buf->npages, i;
	struct scatterlist *sg;
	struct sg_table *sgt;
	int ret;

	if (atomic_dec_if_positive(&buf->fail_maps) >= 0)
		return ERR_PTR(-EIO);
	if (buf->shape == RBLN_TEST_SG_TRUNCATED)
		n--;
	sgt = kzalloc(sizeof(*sgt), GFP_KERNEL);
	if (!sgt)
		return ERR_PTR(-ENOMEM);
	ret = sg_alloc_table(sgt, n, GFP_KERNEL);
	if (ret)
		goto err_free;
	for_each_sgtable_sg(sgt, sg, i) {
		unsigned int off = 0, len = PAGE_SIZE;

		if (i == 0 && buf->shape == RBLN_TEST_SG_OFFSET)
			off = RBLN_TEST_SG_SKEW;
		if (i == 1 && buf->shape == RBLN_TEST_SG_SHORT)
			len -= RBLN_TEST_SG_SKEW;
		sg_set_page(sg, buf->pages[i], len - off, off);
	}
	/*
	 * As drm_prime and udmabuf do: every attachment maps the same pages,
	 * and cache maintenance for one mapping would clobber what a device
	 * writes through another on a machine without coherent DMA, which
	 * DMA-API debugging reports as overlapping mappings.
	 */
	ret = dma_map_sgtable(attach->dev, sgt, dir, DMA_ATTR_SKIP_CPU_SYNC);
	if (ret)
		goto err_table;
	return sgt;

err_table:
	sg_free_table(sgt);
err_free:
	kfree(sgt);
	return ERR_PTR(ret);
}

static void rbln_test_unmap(struct dma_buf_attachment *attach, struct sg_table *sgt,
			    enum dma_data_direction dir)
{
	dma_unmap_sgtable(attach->dev, sgt, dir, DMA_ATTR_SKIP_CPU_SYNC);
	sg_free_table(sgt);
	kfree(sgt);
}

/* The CPU sees the pages as they are, whatever the importers are told. */
static int rbln_test_mmap(struct dma_buf *dmabuf, struct vm_area_struct *vma)
{
	struct rbln_test_buf *buf = dmabuf->priv;
	unsigned long i, n = vma_pages(vma);
	int ret;

	if (vma->vm_pgoff > buf->npages || n > buf->npages - vma->vm_pgoff)
		return -EINVAL;
	/* As every exporter: a GEM importer mapping it insists (drm_gem_mmap_obj()). */
	vm_flags_set(vma, VM_DONTEXPAND | VM_DONTDUMP);
	for (i = 0; i < n; i++) {
		ret = vm_insert_page(vma, vma->vm_start + i * PAGE_SIZE,
				     buf->pages[vma->vm_pgoff + i]);
		if (ret)
			return ret;
	}
	return 0;
}

static void rbln_test_buf_free(struct rbln_test_buf *buf)
{
	unsigned int i;

	for (i = 0; i < buf->npages; i++)
		if (buf->pages[i])
			__free_page(buf->pages[i]);
	kfree(buf);
}

static void rbln_test_release(struct dma_buf *dmabuf)
{
	rbln_test_buf_free(dmabuf->priv);
}

static const struct dma_buf_ops rbln_test_dmabuf_ops = {
	.map_dma_buf = rbln_test_map,
	.unmap_dma_buf = rbln_test_unmap,
	.mmap = rbln_test_mmap,
	.release = rbln_test_release,
};

static struct rbln_test_buf *rbln_test_buf_new(const struct rbln_test_export *args)
{
	struct rbln_test_buf *buf;
	unsigned int i, b;

	buf = kzalloc(struct_size(buf, pages, args->pages), GFP_KERNEL);
	if (!buf)
		return NULL;
	buf->npages = args->pages;
	buf->shape = args->shape;
	atomic_set(&buf->fail_maps, args->fail_maps);
	for (i = 0; i < buf->npages; i++) {
		u8 *p;

		buf->pages[i] = alloc_page(GFP_KERNEL);
		if (!buf->pages[i]) {
			rbln_test_buf_free(buf);
			return NULL;
		}
		p = page_address(buf->pages[i]);
		for (b = 0; b < PAGE_SIZE; b++)
			p[b] = (i + 1) * 16 + b % 16;
	}
	return buf;
}

static int rbln_test_export(struct rbln_test_export __user *uargs)
{
	DEFINE_DMA_BUF_EXPORT_INFO(exp);
	struct rbln_test_export args;
	struct rbln_test_buf *buf;
	struct dma_buf *dmabuf;
	int fd;

	if (copy_from_user(&args, uargs, sizeof(args)))
		return -EFAULT;
	if (args.pages < 2 || args.pages > RBLN_TEST_MAX_PAGES ||
	    args.shape >= RBLN_TEST_SG_SHAPES || args.fail_maps > RBLN_TEST_MAX_FAIL_MAPS)
		return -EINVAL;
	buf = rbln_test_buf_new(&args);
	if (!buf)
		return -ENOMEM;
	exp.ops = &rbln_test_dmabuf_ops;
	exp.size = (size_t)args.pages * PAGE_SIZE;
	exp.flags = O_RDWR | O_CLOEXEC;
	exp.priv = buf;
	dmabuf = dma_buf_export(&exp);
	if (IS_ERR(dmabuf)) {
		rbln_test_buf_free(buf);
		return PTR_ERR(dmabuf);
	}
	/* Installed only once the caller has its number: nothing to take back. */
	fd = get_unused_fd_flags(O_CLOEXEC);
	if (fd < 0 || put_user(fd, &uargs->fd)) {
		if (fd >= 0)
			put_unused_fd(fd);
		dma_buf_put(dmabuf);
		return fd < 0 ? fd : -EFAULT;
	}
	fd_install(fd, dmabuf->file);
	return 0;
}

static long rbln_test_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	if (cmd != RBLN_TEST_IOCTL_EXPORT)
		return -ENOTTY;
	return rbln_test_export((struct rbln_test_export __user *)arg);
}

static const struct file_operations rbln_test_fops = {
	.owner = THIS_MODULE,
	.unlocked_ioctl = rbln_test_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
};

static struct miscdevice rbln_test_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "rbln_test_exporter",
	.fops = &rbln_test_fops,
	.mode = 0600,
};
module_misc_device(rbln_test_misc);

MODULE_DESCRIPTION("dma-buf exporter with malformed scatterlists, for rbln's tests");
MODULE_LICENSE("GPL");
MODULE_IMPORT_NS(DMA_BUF);
