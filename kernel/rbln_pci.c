// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln_pci.c - the NPU as a PCI function
 *
 * BAR0 holds the register block of rbln_hw.h; MSI-X vector r says ring r
 * has news and the vector after the rings says a ring faulted (docs/pci.md).
 * Every vector leads to the driver's one handler, one call at a time, as on
 * the emulated bus. Everything the function reads or writes in host memory
 * is mapped with the DMA API with the function as the DMA device, so an
 * IOMMU translates it.
 *
 * Removal, whether an unbind, a hot-unplug or a surprise removal, goes
 * through the driver's unplug, which stops the function with a function
 * reset before it fails the jobs in flight; then Bus Master Enable is
 * cleared, and the register accessors touch the BAR no more and read
 * all-ones, as a function gone from the bus does.
 */

#include <linux/pci.h>
#include <linux/workqueue.h>

#include <drm/drm_drv.h>
#include <drm/drm_managed.h>

#include "rbln_drv.h"
#include "rbln_hw.h"

#define RBLN_PCI_VENDOR_ID	0xfffe
#define RBLN_PCI_DEVICE_ID	0x0001
#define RBLN_PCI_REGS_BAR	0
#define RBLN_PCI_REGS_MIN	0x1000	/* the register block */

/* Unbinds functions found gone; drained before the driver goes. */
static struct workqueue_struct *rbln_pci_wq;

/**
 * struct rbln_pci - one NPU function
 * @hw: what the driver holds.
 * @pdev: the function.
 * @regs_lock: protects @regs.
 * @regs: BAR0 while the function is bound; NULL once removed.
 * @regs_len: its length.
 * @irq_lock: serialises calls of the driver's handler.
 * @vectors: what each vector's handler is given: its number.
 * @drm: the DRM device, whose reference rbln_pci_lost() takes.
 * @lost_work: unbinds the function found gone (rbln_pci_lost()).
 *
 * Lives in drmm_ memory: as long as the DRM device, which may outlive the
 * binding while files are open.
 */
struct rbln_pci {
	struct rbln_hw hw;
	struct pci_dev *pdev;
	rwlock_t regs_lock; /* protects regs */
	void __iomem *regs;
	resource_size_t regs_len;
	spinlock_t irq_lock; /* serialises the driver's handler */
	struct rbln_pci_vector {
		struct rbln_pci *pci;
		unsigned int index;
	} vectors[RBLN_MAX_RINGS + 1];
	struct drm_device *drm;
	struct work_struct lost_work;
};

static u32 rbln_pci_read32(struct rbln_hw *hw, u32 reg)
{
	struct rbln_pci *pci = container_of(hw, struct rbln_pci, hw);
	u32 val = RBLN_REG_DEAD;

	read_lock(&pci->regs_lock);
	if (pci->regs && reg <= pci->regs_len - 4)
		val = readl(pci->regs + reg);
	read_unlock(&pci->regs_lock);
	return val;
}

static void rbln_pci_write32(struct rbln_hw *hw, u32 reg, u32 val)
{
	struct rbln_pci *pci = container_of(hw, struct rbln_pci, hw);

	read_lock(&pci->regs_lock);
	if (pci->regs && reg <= pci->regs_len - 4)
		writel(val, pci->regs + reg);
	read_unlock(&pci->regs_lock);
}

/* What rbln_pci_lost() queued: its reference keeps @pci and the function. */
static void rbln_pci_lost_work(struct work_struct *work)
{
	struct rbln_pci *pci = container_of(work, struct rbln_pci, lost_work);
	struct drm_device *drm = pci->drm;

	/* Nothing if it was unbound meanwhile. */
	device_release_driver(&pci->pdev->dev);
	drm_dev_put(drm);
}

/*
 * The function reads all-ones but no hotplug event came (a device model
 * that died, a link that went down): unbind it, as the bus would have. Not
 * from here: the caller may be inside what the unbind waits for. Once per
 * device (rbln_device_lost()), and nothing to allocate, so nothing to fail.
 */
static void rbln_pci_lost(struct rbln_hw *hw)
{
	struct rbln_pci *pci = container_of(hw, struct rbln_pci, hw);

	drm_dev_get(pci->drm);
	queue_work(rbln_pci_wq, &pci->lost_work);
}

/*
 * With Bus Master Enable clear a function issues no memory request
 * (PCIe); those already issued land within microseconds, and the device
 * model completes the config write only once none is in flight.
 */
static void rbln_pci_cut_dma(struct rbln_hw *hw)
{
	pci_clear_master(container_of(hw, struct rbln_pci, hw)->pdev);
}

static const struct rbln_hw_ops rbln_pci_hw_ops = {
	.read32 = rbln_pci_read32,
	.write32 = rbln_pci_write32,
	.lost = rbln_pci_lost,
	.cut_dma = rbln_pci_cut_dma,
};

static irqreturn_t rbln_pci_irq(int irq, void *data)
{
	struct rbln_pci_vector *vec = data;
	struct rbln_pci *pci = vec->pci;
	void (*handler)(void *irq_data, unsigned int vector);

	spin_lock(&pci->irq_lock);
	/* Pairs with rbln_job_init()'s release: the rings it serves are ready. */
	handler = smp_load_acquire(&pci->hw.irq);
	if (handler)
		handler(pci->hw.irq_data, vec->index);
	spin_unlock(&pci->irq_lock);
	return IRQ_HANDLED;
}

/* One vector per ring and one for faults; all of them, or the device loses interrupts. */
static int rbln_pci_request_irqs(struct pci_dev *pdev, struct rbln_pci *pci)
{
	u32 rings = rbln_hw_read(&pci->hw, RBLN_REG_NUM_RINGS);
	int nvec, i, ret;

	if (!rings || rings > RBLN_MAX_RINGS) {
		pci_err(pdev, "%u rings is not supported\n", rings);
		return -ENODEV;
	}
	nvec = pci_alloc_irq_vectors(pdev, rings + 1, rings + 1, PCI_IRQ_MSIX);
	if (nvec < 0) {
		pci_err(pdev, "cannot have %u MSI-X vectors: %d\n", rings + 1, nvec);
		return nvec;
	}
	for (i = 0; i < nvec; i++) {
		struct device *dev = &pdev->dev;
		const char *name = i < rings ?
			devm_kasprintf(dev, GFP_KERNEL, "rbln-%s-ring%d", pci_name(pdev), i) :
			devm_kasprintf(dev, GFP_KERNEL, "rbln-%s-fault", pci_name(pdev));

		if (!name)
			return -ENOMEM;
		pci->vectors[i].pci = pci;
		pci->vectors[i].index = i;
		ret = devm_request_threaded_irq(&pdev->dev, pci_irq_vector(pdev, i), NULL,
						rbln_pci_irq, IRQF_ONESHOT, name,
						&pci->vectors[i]);
		if (ret)
			return ret;
	}
	return 0;
}

static int rbln_pci_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct rbln_device *rdev;
	struct rbln_pci *pci;
	void __iomem *regs;
	int ret;

	ret = pcim_enable_device(pdev);
	if (ret)
		return ret;
	if (pci_resource_len(pdev, RBLN_PCI_REGS_BAR) < RBLN_PCI_REGS_MIN) {
		pci_err(pdev, "BAR%d is too small for the registers\n", RBLN_PCI_REGS_BAR);
		return -ENODEV;
	}
	regs = pcim_iomap_region(pdev, RBLN_PCI_REGS_BAR, RBLN_DRIVER_NAME);
	if (IS_ERR(regs))
		return PTR_ERR(regs);
	pci_set_master(pdev);

	ret = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (ret)
		return ret;
	dma_set_max_seg_size(&pdev->dev, UINT_MAX);

	/*
	 * The DRM device first: what the driver keeps of the function lives
	 * as long as it, and the interrupts, requested after, go before it.
	 */
	rdev = rbln_device_alloc(&pdev->dev);
	if (IS_ERR(rdev))
		return PTR_ERR(rdev);
	pci = drmm_kzalloc(&rdev->drm, sizeof(*pci), GFP_KERNEL);
	if (!pci)
		return -ENOMEM;
	pci->hw.ops = &rbln_pci_hw_ops;
	pci->hw.dma_dev = &pdev->dev;
	pci->pdev = pdev;
	pci->drm = &rdev->drm;
	INIT_WORK(&pci->lost_work, rbln_pci_lost_work);
	rwlock_init(&pci->regs_lock);
	pci->regs = regs;
	pci->regs_len = pci_resource_len(pdev, RBLN_PCI_REGS_BAR);
	spin_lock_init(&pci->irq_lock);

	ret = rbln_pci_request_irqs(pdev, pci);
	if (ret)
		return ret;
	return rbln_device_init(rdev, &pci->hw);
}

static void rbln_pci_remove(struct pci_dev *pdev)
{
	struct rbln_device *rdev = pci_get_drvdata(pdev);
	struct rbln_pci *pci = container_of(rdev->hw, struct rbln_pci, hw);

	rbln_device_unplug(rdev);
	/* Stopped already; and should it not have, it can reach no memory now. */
	pci_clear_master(pdev);
	write_lock(&pci->regs_lock);
	pci->regs = NULL;
	write_unlock(&pci->regs_lock);
}

static const struct pci_device_id rbln_pci_ids[] = {
	{ PCI_DEVICE(RBLN_PCI_VENDOR_ID, RBLN_PCI_DEVICE_ID) },
	{ }
};
MODULE_DEVICE_TABLE(pci, rbln_pci_ids);

static struct pci_driver rbln_pci_driver = {
	.name = RBLN_DRIVER_NAME,
	.id_table = rbln_pci_ids,
	.probe = rbln_pci_probe,
	.remove = rbln_pci_remove,
	.dev_groups = rbln_dev_groups,
};

int rbln_pci_register(void)
{
	int ret;

	rbln_pci_wq = alloc_workqueue("rbln_pci", 0, 0);
	if (!rbln_pci_wq)
		return -ENOMEM;
	ret = pci_register_driver(&rbln_pci_driver);
	if (ret)
		destroy_workqueue(rbln_pci_wq);
	return ret;
}

void rbln_pci_unregister(void)
{
	pci_unregister_driver(&rbln_pci_driver);
	/* Every function is unbound: pending releases find nothing to do. */
	destroy_workqueue(rbln_pci_wq);
}
